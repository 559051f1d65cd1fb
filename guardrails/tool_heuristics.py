"""Heuristic answers to the tool gate's questions: :class:`HeuristicToolModel`.

The tool gate (:mod:`guardrails.toolgate`) asks three probability questions about a
pending tool call: is it ``destructive``, does it carry data out of the call
(``exfiltration``), and does it go ``beyond_requested_scope``. This module owns the
question names and the layout of the text the gate gives a model
(:func:`guardrails.toolgate.tool_input`), and answers from that text alone:
deterministic, no I/O, microseconds per call. It is the gate's default model and the fallback of
an LLM oracle.

The cues are general, not lists of tool names: the tool's *action* comes from the
words of its name (``cancelAppointment``, ``delete-file``), else from its
description, plus action-like arguments (``{"status": "cancelled"}``,
``{"overwrite": true}``); a name that starts with a lookup verb (get, list, check,
...) is a lookup. The caller's words are the goal and the caller's turns, plus an
assistant turn the caller answered with "yes"; a word after "don't", "not",
"never", "instead of" in the same clause does not count. Which cues fired goes to
``provider_data["cues"]`` (category names, never argument values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from .rule_validators import card, iban

__all__ = ["HeuristicToolModel", "QUESTIONS", "Q_BEYOND_SCOPE", "Q_DESTRUCTIVE", "Q_EXFILTRATION"]

Q_DESTRUCTIVE = "destructive"
Q_EXFILTRATION = "exfiltration"
Q_BEYOND_SCOPE = "beyond_requested_scope"
QUESTIONS = (Q_DESTRUCTIVE, Q_EXFILTRATION, Q_BEYOND_SCOPE)

# The layout of the input text (written by guardrails.toolgate.tool_input): a header
# line, then one prefixed line per value, so nothing a caller says can pass for the call.
CALLER_HEADER = "What the caller asked for"
CALL_HEADER = "Pending tool call"
GOAL = "Goal:"
RECENT = "Recent turns:"
TOOL = "Tool:"
DESCRIPTION = "Description:"
ARGUMENTS = "Arguments (JSON):"
NONE = "(none)"
_CALLER_ROLES = frozenset({"user", "caller", "customer", "human"})


@dataclass(frozen=True)
class _View:
    name: str = ""
    description: str = ""
    arguments: Any = None
    goal: str = ""
    turns: tuple[tuple[str, str], ...] = ()


def _after(line: str, prefix: str) -> str:
    value = line[len(prefix) :].strip()
    return "" if value == NONE else value


def _parse(text: str) -> _View:
    """The parts of an input text; text in another shape is all tool description."""
    lines = text.splitlines()
    if CALL_HEADER not in lines:
        return _View(description=" ".join(text.split()))
    split = lines.index(CALL_HEADER)
    goal, turns = "", []
    for line in lines[:split]:
        if line.startswith(GOAL):
            goal = _after(line, GOAL)
        elif ": " in line and not line.startswith(RECENT):
            role, _, said = line.partition(": ")
            turns.append((role.strip().lower(), said.strip()))
    parts = dict.fromkeys((TOOL, DESCRIPTION, ARGUMENTS), "")
    for line in lines[split + 1 :]:
        for prefix in parts:
            if line.startswith(prefix):
                parts[prefix] = _after(line, prefix)
    try:
        arguments: Any = json.loads(parts[ARGUMENTS] or "{}")
    except ValueError:
        arguments = parts[ARGUMENTS]
    return _View(parts[TOOL], parts[DESCRIPTION], arguments, goal, tuple(turns))


# -- words ------------------------------------------------------------------------------


def _norm(text: str) -> str:
    """Lowercase words, apostrophes dropped, clause breaks as ``|``."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text).lower()
    text = re.sub(r"['\u2019]", "", text)
    text = re.sub(r"[.!?;,]+(?:\s|$)|\bbut\b", " | ", text)
    return " ".join(re.sub(r"[^a-z0-9|]+", " ", text).split())


def _vocab(items: str) -> re.Pattern[str]:
    """Comma-separated whole-word alternatives: ``cancel*`` any ending, ``*`` any one word."""
    alts = []
    for item in items.split(","):
        words = [
            r"\w+" if w == "*" else re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w)
            for w in item.split()
        ]
        alts.append(" ".join(words))
    return re.compile(r"\b(?:" + "|".join(alts) + r")\b")


_NEGATORS = frozenset({"not", "dont", "doesnt", "didnt", "never", "without", "nor", "wont"})
_NEGATOR_PAIRS = ("no need", "instead of", "rather than")


def _negated(text: str, start: int) -> bool:
    before = text[:start].rsplit("|", 1)[-1].split()[-3:]
    pairs = " ".join(before[-2:])
    return any(w in _NEGATORS for w in before) or pairs in _NEGATOR_PAIRS


def _said(vocab: re.Pattern[str], text: str) -> bool:
    """Whether ``vocab`` matches ``text`` (normalised) anywhere not negated."""
    return any(not _negated(text, m.start()) for m in vocab.finditer(text))


@dataclass(frozen=True)
class _Action:
    name: str
    tool: re.Pattern[str]  # how a tool names the action
    caller: re.Pattern[str]  # how a caller asks for it
    harm: float  # the destructive answer for one item


# "<list>: words" (indented lines continue a list). "<action>.tool": how a tool names the
# action, "<action>.caller": how a caller asks for it; the other lists are single cues.
_WORD_TABLE = """
cancel.tool: cancel*, void*, revok*, terminat*, unsubscrib*, unbook*, abort*
cancel.caller: cancel*, call* off, scrap*, unsubscrib*, terminat*, no longer need*,
    wont make it, cant make it, cant come, not coming, unbook*
delete.tool: delet*, remov*, eras*, purg*, wipe, wipes, wiped, wiping, destroy*, drop, drops,
    dropped, clear*, truncat*, forget
delete.caller: delet*, remov*, eras*, purg*, get rid of, wipe*, clear*, forget*, take * off
reset.tool: reset*
reset.caller: reset*, forgot*, locked out, start over
close.tool: clos*, deactivat*, disabl*, suspend*, shut*
close.caller: clos*, deactivat*, disabl*, suspend*, shut*, cancel*, delet*
overwrite.tool: overwrit*, replac*, overrid*
overwrite.caller: overwrit*, replac*, overrid*, chang*, updat*, swap*
refund.tool: refund*, reimburs*, chargeback*
refund.caller: refund*, money back, reimburs*, charged twice, double charged, overcharg*,
    charge back
money.tool: pay, pays, paid, paying, payment*, payout*, charg*, withdraw*, wire, wires, wired,
    wiring, remit*, disburs*, deposit*, transfer* fund*, transfer* money, send* money
money.caller: pay, pays, paid, paying, payment*, charg*, bill*, transfer*, wire*, send money,
    move money, withdraw*, deposit*, settle*
change.tool: updat*, chang*, modif*, edit*, set, sets, reschedul*, move, moves, switch*, amend*,
    patch*, renam*, correct*, adjust*
change.caller: chang*, move, moving, reschedul*, updat*, modif*, edit*, switch*, push * back,
    push it back, bring * forward, different time, different day, different date, amend*,
    correct*, fix*, renam*, adjust*
create.tool: creat*, book*, schedul*, add, adds, insert*, regist*, enrol*, reserv*, make, new,
    submit*, place, order*, sign up, signup, subscrib*, open*, save*, store*, write*, put
create.caller: book*, schedul*, make, set * up, set up, arrang*, reserv*, sign* up, add*,
    creat*, new, order*, regist*, enrol*, open*, get me, save*, note*, remember*, keep*
send.tool: send*, sent, email*, mail*, text*, sms, messag*, forward*, shar*, export*, upload*,
    post*, publish*, notif*, fax*, transmit*, sync*, push*, webhook*, dispatch*, invit*
send.caller: send*, sent, email*, e mail, mail*, text*, sms, messag*, forward*, shar*, export*,
    upload*, fax*, post*, invit*
transfer_call.tool: transfer*, escalat*, handoff, hand off, connect*
transfer_call.caller: transfer*, speak to, speak with, talk to, talk with, human, person, agent,
    operator, representative, manager, someone, escalat*
lookup: get, gets, list*, find*, search*, lookup*, look*, check, checks, read, reads, view*,
    show*, fetch*, query*, retriev*, describ*, count*, verif*, validat*, is, has, can, preview*,
    estimat*, quote, quotes, calculat*, return*, inspect*, see, available
outbound: export*, upload*, shar*, forward*, publish*, post*, sync*, webhook*, transmit*
money: amount*, fund*, money, balance*, currenc*, iban, routing, dollar*, usd, eur, gbp, cents
account: account*, membership*, subscription*, profile*, card*, service*, line, policy, plan,
    contract*, user*
bulk: all, every*, bulk, batch*, mass, entire, whole
caller_bulk: all, every*, each, both, entire, whole, everything
phone_key: phone*, mobile*, cell*, tel*, fax*, sms, whatsapp
destination_key: recipient*, destination*, webhook*, url*, uri, endpoint*, email*, phone*,
    address*, mobile*
id_key: ssn, social security*, passport*, licen*, national id, tax id, tin, card number, card,
    cvv, cvc, pin, account number, routing*, iban, date of birth, dob, password*, secret*
"""
_WORDS = {
    name: _vocab(words)
    for name, words in (
        line.split(": ", 1) for line in _WORD_TABLE.strip().replace("\n    ", " ").splitlines()
    )
}
# the destructive answer for one item, in the order actions are listed in cues
_HARM = {"cancel": 0.9, "delete": 0.9, "reset": 0.85, "close": 0.5, "overwrite": 0.85}
_HARM |= {"refund": 0.85, "money": 0.85, "change": 0.35, "create": 0.2, "send": 0.2}
_HARM |= {"transfer_call": 0.1}
_ACTIONS = tuple(
    _Action(n, _WORDS[f"{n}.tool"], _WORDS[f"{n}.caller"], harm) for n, harm in _HARM.items()
)
_BY_NAME = {a.name: a for a in _ACTIONS}
_OUTBOUND = frozenset({"send", "transfer_call"})
_ACTION_KEYS = frozenset(
    "action operation op status state type mode method command verb intent kind".split()
)
_YES = re.compile(
    r"^(?:yes|yeah|yep|sure|ok|okay|please do|go ahead|correct|thats right|absolutely|do it|"
    r"sounds good|fine|right|please)\b"
)
_FILLER = frozenset(
    "a an the to for by of on in my and or with from id ids info details detail data record "
    "records item items entry request all tool api do run perform action user caller customer "
    "me v1 v2 take issue process handle execute trigger start initiate apply call".split()
)


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of the arguments with the words of its key (the innermost)."""
    yield key, value
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk(v, _norm(str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v, key)


@dataclass(frozen=True)
class _Call:
    """What the heuristics read off one pending call."""

    actions: tuple[_Action, ...]
    lookup: bool
    name: str  # normalised words
    words: str  # name, description and argument keys, normalised
    bulk: bool
    leaves: tuple[tuple[str, Any], ...]


def _named_actions(text: str) -> tuple[list[_Action], bool]:
    """The actions a name or description names, and whether it names a lookup.

    The first word, when it is a verb, is the action ("delete_messages" deletes, it
    does not message); otherwise every action word counts ("appointment_cancel").
    """
    first = text.split("|")[0].split()[:1]
    if first and _WORDS["lookup"].fullmatch(first[0]):
        return [], True
    lead = [a for a in _ACTIONS if first and a.tool.fullmatch(first[0])]
    return lead or [a for a in _ACTIONS if _said(a.tool, text)], False


def _read_call(view: _View) -> _Call:
    name, desc = _norm(view.name), _norm(view.description)
    leaves = tuple(_walk(view.arguments))
    keys = " ".join(k for k, _ in leaves)
    found, lookup = _named_actions(name)
    if not found and not lookup:
        found, lookup = _named_actions(desc)
    for key, value in leaves:
        # action-like arguments: {"status": "cancelled"}, {"overwrite": true}
        said = _norm(value) if isinstance(value, str) and key in _ACTION_KEYS else ""
        said = key if value is True else said
        if len(said.split()) <= 3:
            found += [a for a in _ACTIONS if a not in found and _said(a.tool, said)]
    if _BY_NAME["transfer_call"] in found and _WORDS["money"].search(f"{name} {keys}"):
        found = [a for a in found if a.name != "transfer_call"] + [_BY_NAME["money"]]
    bulk = bool(_WORDS["bulk"].search(name)) or any(
        (isinstance(v, str) and _norm(v) in ("all", "every", "everything", "all of them"))
        or (isinstance(v, str) and v.strip() == "*")
        or (v is True and _WORDS["bulk"].search(k))
        or (isinstance(v, list) and len(v) >= 3 and not any(isinstance(i, Mapping) for i in v))
        for k, v in leaves
    )
    return _Call(tuple(found), lookup and not found, name, f"{name} {desc} {keys}", bulk, leaves)


# -- the three questions -------------------------------------------------------------------

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:https?|ftp|wss?)://\S+|www\.\S+", re.IGNORECASE)
_PHONE = re.compile(r"\+?[\d\s().-]{7,22}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}.*|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}")
_CARD = re.compile(r"[\d\s-]{13,23}")
_SSN = re.compile(r"\d{3}-\d{2}-\d{4}")


def _phone(value: str, key: str) -> bool:
    """A phone number: 7-15 digits, written like one or under a phone-like key."""
    text = value.strip()
    digits = sum(c.isdigit() for c in text)
    if not (_PHONE.fullmatch(text) and 7 <= digits <= 15) or _DATE.fullmatch(text):
        return False
    phone_key = key == "to" or bool(_WORDS["phone_key"].search(key))
    return text.startswith("+") or not text.isdigit() or phone_key


def _contact(value: Any, key: str) -> bool:
    return isinstance(value, str) and bool(_EMAIL.fullmatch(value.strip()) or _phone(value, key))


def _destructive(call: _Call) -> tuple[float, list[str]]:
    """How destructive the call looks, and the cues (action names, ``bulk``)."""
    cues = [a.name for a in call.actions]
    harms = [a.harm for a in call.actions]
    if "close" in cues and _WORDS["account"].search(call.words):
        harms.append(0.9)
        cues.append("account")
    value = max(harms, default=0.05 if call.lookup else 0.3)
    if call.bulk and call.actions:
        value = value + 0.05 if value >= 0.8 else 0.85
        cues.append("bulk")
    return value, cues


def _leaf_cues(key: str, value: Any) -> Iterator[str]:
    """What one argument value carries: a destination, an id number, records."""
    if isinstance(value, list | tuple):
        if sum(isinstance(v, Mapping) for v in value) >= 2:
            yield "records"
        if sum(_contact(v, key) for v in value) >= 3:
            yield "records"
        return
    if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
        return
    text = str(value).strip()
    if _URL.fullmatch(text):
        yield "url_with_data" if _EMAIL.search(text) or re.search(r"\d{7,}", text) else "url"
    elif _EMAIL.fullmatch(text):
        yield "email"
    elif isinstance(value, str) and _phone(text, key):
        yield "phone"
    elif key in ("to", "cc", "bcc") or _WORDS["destination_key"].search(key):
        if not _DATE.fullmatch(text):
            yield "recipient"
    if (_CARD.fullmatch(text) and card(text)) or _SSN.fullmatch(text) or iban(text):
        yield "id_number"
    elif _WORDS["id_key"].search(key):
        yield "id_number"


def _exfiltration(call: _Call) -> tuple[float, list[str]]:
    """How much the call looks like carrying data out of the call, and the cues."""
    found = {cue for key, value in call.leaves for cue in _leaf_cues(key, value)}
    outbound = any(a.name in _OUTBOUND for a in call.actions)
    destinations = found & {"url", "url_with_data", "email", "phone", "recipient"}
    value = 0.05
    if outbound:
        found.add("outbound")
        value = 0.9 if destinations else 0.5 if _WORDS["outbound"].search(call.name) else 0.35
    elif "url_with_data" in found:
        value = 0.85
    elif "url" in found:
        value = 0.5
    elif destinations:
        value = 0.25
    if "id_number" in found:
        value = max(value, 0.85)
    if "records" in found:
        value = max(value, 0.95 if outbound else 0.85)
    return value, sorted(found)


def _caller_text(view: _View) -> str:
    """The caller's words: goal, caller turns, and agent turns the caller said yes to."""
    parts = [view.goal]
    for i, (role, text) in enumerate(view.turns):
        if role in _CALLER_ROLES:
            parts.append(text)
        elif i + 1 < len(view.turns) and view.turns[i + 1][0] in _CALLER_ROLES:
            if _YES.match(_norm(view.turns[i + 1][1])):
                parts.append(text)
    return " | ".join(_norm(p) for p in parts if p.strip())


def _mentions(word: str, caller: str) -> bool:
    stem = word[: min(len(word), max(4, len(word) - 3))]
    return re.search(rf"\b{re.escape(stem)}", caller) is not None


def _beyond_scope(call: _Call, view: _View) -> tuple[float, list[str]]:
    """How far the call looks beyond what the caller asked for, and the cues."""
    caller = _caller_text(view)
    if not caller.strip("| "):
        return 0.5, ["no_caller_words"]
    actions = [a for a in call.actions if not _said(a.caller, caller)]
    cues = [f"unrequested_{a.name}" for a in actions]
    objects = [
        w
        for w in call.name.split()
        if w not in _FILLER
        and not w.isdigit()
        and not any(a.tool.fullmatch(w) for a in _ACTIONS)
        and not _WORDS["lookup"].fullmatch(w)
    ]
    named = any(_mentions(w, caller) for w in objects)
    if actions:
        # a low-harm action on something the caller talked about ("remind me" and
        # set_reminder) is a maybe; anything else the caller did not ask for is out
        low = named and max(a.harm for a in actions) < 0.5
        value = 0.55 if low else 0.85
    elif call.lookup:
        value = 0.15
    elif not call.actions:
        value = 0.3 if named else 0.6
        cues.append("unknown_action")
    else:
        value = 0.1 if named or not objects else 0.3
    if objects and not named and call.actions:
        cues.append("unnamed_object")
    if call.bulk and call.actions and not _said(_WORDS["caller_bulk"], caller):
        value = max(value, 0.8)
        cues.append("unrequested_bulk")
    return value, cues


class HeuristicToolModel(llm.DecisionModel):
    """Answers the tool gate's probability questions from the input text alone.

    The decision's *name* selects the heuristic (its prompt is ignored):
    :data:`Q_DESTRUCTIVE`, :data:`Q_EXFILTRATION` or :data:`Q_BEYOND_SCOPE`; other
    names and other decision kinds come back as errors. The input is a
    :func:`guardrails.toolgate.tool_input` text.
    """

    def __init__(self) -> None:
        """A model with no state: one can be shared by every call."""
        super().__init__(capabilities=llm.DecisionCapabilities(decision_kinds=["probability"]))

    @property
    def model(self) -> str:
        """``tool-heuristics``."""
        return "tool-heuristics"

    @property
    def provider(self) -> str:
        """``local``."""
        return "local"

    async def _evaluate_impl(
        self,
        *,
        input: str,
        decisions: Mapping[str, llm.Decision],
        conn_options: APIConnectOptions,
    ) -> llm.DecisionResponse:
        view = _parse(input)
        call = _read_call(view)
        answers = {
            Q_DESTRUCTIVE: lambda: _destructive(call),
            Q_EXFILTRATION: lambda: _exfiltration(call),
            Q_BEYOND_SCOPE: lambda: _beyond_scope(call, view),
        }
        results: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, decision in decisions.items():
            if not isinstance(decision, llm.Probability) or name not in answers:
                errors[name] = f"the tool heuristics answer probabilities named {QUESTIONS}"
                continue
            value, cues = answers[name]()
            results[name] = llm.ProbabilityResult(value=value, provider_data={"cues": cues})
        return llm.DecisionResponse(
            results=results, errors=errors, model=self.model, provider=self.provider
        )
