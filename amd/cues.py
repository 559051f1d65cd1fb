"""Structural cues: menus and carrier intercepts recognised by their shape, not one phrase.

Pure functions over :func:`amd.phrases.normalise`-d words. A phrase pack lists
exact phrases; menus and carrier messages come in endless wordings, so these
rules look for what every such recording has:

* **a menu option**: a purpose ("for billing", "to report an outage", "if you
  are a new patient") followed within a few words by a key instruction ("press
  1", "dial 2", "select option 3", "say sales"), or the reverse order ("press
  1 for billing"); a list of options without verbs ("1 for delivery, 2 for
  carry out") counts when it has two items;
* **a menu prompt without keys**: spoken menus ("you can say", "just say ...
  or ..."), data entry ("enter your account number", "followed by the pound
  sign"), directories ("dial by name", "the first three letters of their last
  name", "extension"), and language selection: two languages offered, or a
  prompt in Spanish or French ("oprima", "marque", "appuyez");
* **a carrier intercept**: an announcement about the dialled party ("the
  subscriber you have dialed", "the customer you are calling", "the number
  you have called", or only "you are calling" before a state nobody says of a
  person) together with what ends the call ("cannot be reached",
  "try again later", "switched off", "not a valid number"), with no offer to
  take a message; or "completed ... dialed", what is left of "could not be
  completed as dialed".

Each cue is returned as ``(category, label, start word, strength)``; the
phrase gate adds them to its hits. The words are already tolerant of the
recogniser's spellings (:func:`amd.tolerance.canonical_words`).
"""

from __future__ import annotations

from collections.abc import Sequence

from amd.menu_shapes import DAMAGED, damaged_menu_cues, glued_key, is_press_like
from amd.tolerance import FUNCTION_WORDS, SOUND_ALIKE, word_quality

__all__ = [
    "Cue",
    "canonical_words",
    "carrier_cues",
    "menu_cues",
    "opens_with_welcome",
    "opens_with_where_we_called",
    "screener_cues",
]

Cue = tuple[str, str, int, float]

_KEY_VERBS = frozenset({"press", "dial", "push", "select", "choose", "enter", "hit", "touch"})
_KEY_WORDS = frozenset({"pound", "star", "hash", "zero"})
_PURPOSE = frozenset({"for", "to", "if"})
_NEAR = 7


def _is_key(token: str) -> bool:
    return token.isdigit() or token in _KEY_WORDS


def _key_after(tokens: Sequence[str], i: int) -> bool:
    """A key follows the verb at ``i`` ("press 1", "select option 2", "dial extension 204")."""
    for j in range(i + 1, min(len(tokens), i + 4)):
        if _is_key(tokens[j]):
            return True
        if tokens[j] not in {"option", "number", "extension", "the", "key", "button", "now"}:
            return False
    return False


def _menu_options(tokens: Sequence[str]) -> list[Cue]:
    cues: list[Cue] = []
    for i, tok in enumerate(tokens):
        if tok in _KEY_VERBS and _key_after(tokens, i):
            before = tokens[max(0, i - _NEAR) : i]
            after = tokens[i + 2 : i + 4]
            if any(w in _PURPOSE for w in before) or any(w in ("for", "to") for w in after):
                cues.append(("machine-ivr", f"menu option: {tok} a key", i, 1.0))
    # "1 for delivery, 2 for carry out": two verbless options
    listed = [
        i
        for i in range(len(tokens) - 2)
        if _is_key(tokens[i]) and tokens[i + 1] == "for" and (i == 0 or not tokens[i - 1].isdigit())
    ]
    # menus count their keys up (an operator's 0 may come last); a person's "two
    # for the morning and one for the afternoon" counts down
    keys = [tokens[i] for i in listed]
    counted_up = any(
        not (a.isdigit() and b.isdigit()) or int(a) < int(b)
        for a, b in zip(keys, keys[1:], strict=False)
    )
    if len(listed) >= 2 and counted_up:
        cues.append(("machine-ivr", "menu option list", listed[0], 1.0))
    return cues


#: Spoken, data-entry and directory prompts: word sequences ({w} is any one word).
#: Nothing a call screener says ("please say your name", "tell me why you are
#: calling"): menus outrank screeners in the phrase gate.
_PROMPTS: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "you can say",
        "you may say",
        "just say",
        "simply say",
        "or say",
        "say or enter",
        "say or press",
        "in a few words",
        "enter your {w} number",
        "please say your {w} number",
        "enter your {w}",
        "followed by the pound",
        "followed by pound",
        "pound sign",
        "pound key",
        "dial by name",
        "company directory",
        "staff directory",
        "employee directory",
        "the directory",
        "letters of their last name",
        "letters of the last name",
        "letters of the persons last name",
        "his or her extension",
        "party's extension",
        "parties extension",
        "extension of the",
        "dial it at any time",
        "at any time during this message",
        "choose from the following",
        "following options",
        "listen to the following",
        "main menu",
        "return to the main menu",
        "to repeat these options",
        "repeat this menu",
        # what whisper tiny.en keeps of "To repeat these options, press the star key"
        # in 13 voices: "To repeat the option", "The repeating option", "to redeem the
        # options", "press the key", "press master key" (docs/amd.md, fourteenth round)
        "repeat {w} option",
        "repeat {w} options",
        "repeat {w} {w} option",
        "repeating option",
        "repeating options",
        "redeem the options",
        "star key",
        "press the key",
        "press the {w} key",
        "press {w} key",
    )
)

#: Languages a selection menu offers, as the recogniser writes them.
_LANGUAGES = frozenset(
    {
        "english",
        "spanish",
        "espanol",
        "french",
        "francais",
        "vietnamese",
        "chinese",
        "mandarin",
        "cantonese",
        "korean",
        "russian",
        "portuguese",
        "creole",
        "arabic",
        "tagalog",
    }
)
#: Prompt words of Spanish and French menus ("oprima", "marque", "appuyez").
_FOREIGN_PROMPTS = frozenset(
    {"oprima", "oprimo", "marque", "presione", "pulse", "diga", "appuyez", "appuyer", "composez"}
)


_VOCABULARY = tuple(
    sorted(
        _KEY_VERBS
        | _LANGUAGES
        | _FOREIGN_PROMPTS
        | {"option", "extension", "directory", "subscriber", "customer", "disconnected"}
    )
)


def canonical_words(tokens: Sequence[str]) -> list[str]:
    """Tokens with recogniser spellings of cue words put right ("preth" -> "press").

    Only sound-alike spellings (:func:`amd.tolerance.word_quality` at least
    ``SOUND_ALIKE``) of the cues' own vocabulary are replaced.
    """
    out = []
    for t in tokens:
        if len(t) >= 4 and t not in _VOCABULARY:
            best = max(_VOCABULARY, key=lambda w: word_quality(t, w))
            if word_quality(t, best) >= SOUND_ALIKE:
                t = best
        out.append(t)
    return out


def _prompt_at(tokens: Sequence[str], i: int, words: tuple[str, ...]) -> bool:
    if i + len(words) > len(tokens):
        return False
    return all(w == "{w}" or tokens[i + k] == w for k, w in enumerate(words))


def _first_at(tokens: Sequence[str], phrases: Sequence[tuple[str, ...]]) -> int | None:
    """Where the first of ``phrases`` to be said in ``tokens`` starts, or None."""
    return next((i for i in range(len(tokens)) for w in phrases if _prompt_at(tokens, i, w)), None)


def opens_with_welcome(tokens: Sequence[str]) -> bool:
    """Whether a business's welcome ("Thank you for calling", "Welcome to") opens
    ``tokens``, after at most a greeting ("Hi, thanks for calling", "Good morning and
    welcome to")."""
    first = _welcome_at(canonical_words(tokens))
    return first is not None and first <= 3


#: "You've reached X" as the recogniser keeps it ("You'll reach like your mortars",
#: "You can reach senior melee clinic", whisper tiny.en on espeak-ng voices).
_REACHED = tuple(
    tuple(p.split())
    for p in (
        "you have reached",
        "you reached",
        "you have reach",
        "you will reach",
        "you can reach",
    )
)


def opens_with_where_we_called(tokens: Sequence[str]) -> bool:
    """Whether an announcement of where we called ("You've reached X") opens
    ``tokens``, after at most a greeting ("Hi, you've reached ..."). Menus and
    mailboxes open so; a receptionist who does goes on with their name or an offer to
    help, as after a welcome. Not "you reached me": that is a person's."""
    for i in range(min(4, len(tokens))):
        for phrase in _REACHED:
            if _prompt_at(tokens, i, phrase):
                after = tokens[i + len(phrase)] if i + len(phrase) < len(tokens) else ""
                return after not in _PRONOUNS
    return False


def _welcome_at(tokens: Sequence[str]) -> int | None:
    """Where a business's welcome starts in ``tokens``, or None: one of
    :data:`_WELCOME` anywhere, or "welcome to" as the recogniser splits it
    (:data:`_SPLIT_WELCOME`: "will come to", "when come to"), opening the words
    after at most a greeting or "we" (:data:`_BEFORE_SPLIT_WELCOME`): nobody answers
    a call with "We'll come to ..."."""
    first = _first_at(tokens, _WELCOME)
    if first is None:
        # "Thank you for calling" with its thanks lost: "And for calling Frontier
        # Airlines" (whisper tiny.en, a female espeak-ng voice), opening the words
        thanks_lost = _first_at(tokens[: _SPLIT_WELCOME_BY + 2], (_FOR_CALLING,))
        if thanks_lost is not None and not set(tokens[:thanks_lost]) & _NOT_THANKS:
            first = thanks_lost
    split = _first_at(tokens[: _SPLIT_WELCOME_BY + 3], _SPLIT_WELCOME)
    if split is not None and set(tokens[:split]) <= _BEFORE_SPLIT_WELCOME:
        return split if first is None else min(first, split)
    return first


def menu_cues(tokens: Sequence[str]) -> list[Cue]:
    """Menu evidence in one transcript's words (strong ``machine-ivr`` cues)."""
    tokens = canonical_words(tokens)
    cues = _menu_options(tokens)
    if not cues:
        cues = damaged_menu_cues(tokens)
    for i in range(len(tokens)):
        for words in _PROMPTS:
            if _prompt_at(tokens, i, words):
                cues.append(("machine-ivr", "menu prompt: " + " ".join(words), i, 1.0))
    langs = {t for t in tokens if t in _LANGUAGES}
    named = {"espanol" if t == "spanish" else "francais" if t == "french" else t for t in langs}
    foreign = [i for i, t in enumerate(tokens) if t in _FOREIGN_PROMPTS]
    offered = [
        i
        for i in range(len(tokens) - 1)
        if tokens[i] in {"for", "in", "para", "en", "pour"} and tokens[i + 1] in _LANGUAGES
    ]
    if foreign:
        cues.append(("machine-ivr", "language menu: a prompt in another language", foreign[0], 1.0))
    elif offered and len(named) >= 2:
        cues.append(("machine-ivr", "language menu: languages offered", offered[0], 1.0))
    else:
        # the recogniser often keeps one language of a two-language menu: a language
        # named with what selecting it takes ("for English, please stay on the line",
        # "to continue in English") is still a selection
        chosen = [
            i
            for i in offered
            if (i > 0 and tokens[i - 1] == "continue")
            or _selects(next((t for t in tokens[i + 2 : i + 4] if t != "please"), ""))
            # "for English, please stay on the line" with the verb misheard ("pay")
            or _on_the_line(tokens[i + 2 : i + 7])
            # "for English, class 1": the verb misheard as any word, its key kept
            or (
                i + 3 < len(tokens)
                and tokens[i + 2].isalpha()
                and len(tokens[i + 3]) == 1
                and tokens[i + 3].isdigit()
            )
            # "For English 21": verb and key heard as one number, opening the words
            or (i == 0 and i + 2 < len(tokens) and tokens[i + 2].isdigit())
            # "For English, please tell them the right." ("... please stay on the
            # line", all of it lost but the language and "please"): words that open
            # with "for", a language and "please", and go on, are a selection; a
            # person's "In English, please!" opens with "in", and "For English,
            # great." asks nothing
            or (i == 0 and tokens[0] == "for" and tokens[2:3] == ["please"] and len(tokens) >= 4)
        ]
        # or a prompt that opens the words with a service in a language ("For service
        # in English, ...", "For assistance in Spanish"), the rest lost: nobody
        # answers a call so ("for me in English?" asks something of us)
        chosen += [
            i
            for i in offered
            if tokens[i] == "in"
            and tokens[:1] == ["for"]
            and 2 <= i <= 4
            and not set(tokens[1:i]) & _PRONOUNS
        ]
        # or a language right before its key verb and key, however the preposition
        # before it came out ("the English present, one", "in the English prayer one",
        # "Foreign English, prezuan": the key glued to its verb)
        chosen += [
            i
            for i in range(len(tokens) - 1)
            if tokens[i] in _LANGUAGES
            and (
                (
                    tokens[i + 1] not in _SELECT_WORDS
                    and _selects(tokens[i + 1])
                    and i + 2 < len(tokens)
                    and tokens[i + 2].isdigit()
                )
                or glued_key(tokens[i + 1])
            )
        ]
        if chosen:
            cues.append(("machine-ivr", "language menu: a language to select", chosen[0], 1.0))
    reached = next(
        (
            i
            for i, t in enumerate(tokens)
            if t == "reached" or (t == "reach" and i > 0 and tokens[i - 1] == "you")
        ),
        None,
    )
    if reached is not None:
        # a recording's "you've reached X" asking which department: a spoken menu (its
        # "just say sales, service or parts" is what the recogniser loses first); a
        # receptionist asks it without announcing where we called
        ask = next(
            (
                j
                for j in range(reached + 1, len(tokens) - 1)
                if tokens[j] == "which"
                and (
                    _department(tokens[j + 1])
                    # a function word slipped in: "which the department would you like"
                    or (
                        tokens[j + 1] in FUNCTION_WORDS
                        and j + 2 < len(tokens)
                        and _department(tokens[j + 2])
                    )
                )
            ),
            None,
        )
        if ask is not None:
            cues.append(("machine-ivr", "menu prompt: a recording asks which department", ask, 1.0))
    welcome = _welcome_at(tokens)
    if welcome is not None and any(
        _prompt_at(tokens, i, w) for i in range(welcome, len(tokens)) for w in _TELL_WHY
    ):
        # a call screener never welcomes you to a business: a speech-driven menu does
        cues.append(("machine-ivr", "menu prompt: a business asks why you call", welcome, 1.0))
    else:
        # "Welcome to Metro Wireless. To get started, please say ...": what to say is
        # what the recogniser loses; a screener asks for our name, never after a
        # welcome, and the welcome may be lost where "to get started" is not
        start = welcome if welcome is not None else _first_at(tokens, (_STARTED,))
        if (
            start is not None
            and any(
                tokens[i : i + 2] == ["please", "say"]
                # "please say your name" is a screener's; "the name of ..." is not ours
                and (tokens[i + 3 : i + 4] != ["name"] or tokens[i + 4 : i + 5] == ["of"])
                and tokens[i + 2 : i + 3] not in (["that"], ["it"], ["again"], ["hi"], ["hello"])
                for i in range(start, len(tokens))
            )
        ):
            cues.append(("machine-ivr", "menu prompt: a business says what to say", start, 1.0))
    return cues


#: Who a "for ... in English" is for when it asks something of us, not a service.
_PRONOUNS = frozenset("me you us him her them it this that".split())

#: Plain words that select but are no key verb ("English, stay on the line").
_SELECT_WORDS = frozenset({"stay", "remain", "hold"})

#: What selecting a language in a menu takes, right after the language is named.
_SELECT = _SELECT_WORDS | {"press", "dial", "say", "oprima", "marque"}


def _department(word: str) -> bool:
    # its first syllable is what the recogniser loses: "which the apartment would you
    # like" (whisper tiny.en, two espeak-ng accents)
    return word.startswith("department") or word.endswith(("partment", "partments"))


def _on_the_line(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` start "<verb> on the line" or "please <verb> on the line"."""
    skip = 2 if tokens[:1] == ["please"] else 1
    # "on" may be lost too: "For English, please pay the line."
    return list(tokens[skip : skip + 3]) == ["on", "the", "line"] or list(
        tokens[skip : skip + 2]
    ) == ["the", "line"]


def _selects(word: str) -> bool:
    # "press" glued to its key, cut short or misheard: "pre-run", "prezware", "pray",
    # "prayer" (amd/menu_shapes.py's press-like words)
    # (not "great": "in English, great" is a reply)
    return (
        word in _SELECT
        or word.startswith("pre")
        or (word.startswith(("pr", "br")) and is_press_like(word))
    )


#: A business's welcome, and the imperative ask a speech menu follows it with.
_WELCOME = tuple(
    tuple(p.split())
    for p in ("welcome to", "thank you for calling", "thanks for calling", "thank you for choosing")
)
#: "Welcome to" split in two by the recogniser: whisper tiny.en wrote "will come to"
#: or "we'll come to" for 35 of 130 synthesised welcomes in 13 voices, and for 9 of
#: 10 in one of them; another voice made it "when come to" (docs/amd.md,
#: "Fourteenth round").
_SPLIT_WELCOME = (("will", "come", "to"), ("well", "come", "to"), ("when", "come", "to"))
#: How many words ("hi and we") may come before a split welcome, and which: "I
#: will come to you" is a person's promise.
_SPLIT_WELCOME_BY = 3
_BEFORE_SPLIT_WELCOME = frozenset(
    {"hi", "hello", "and", "we", "good", "morning", "afternoon", "evening"}
)
#: What is left of "thank you for calling" when the thanks is lost, and the words
#: before it that say something else ("sorry for calling so late", a screener's
#: "name and reason for calling").
_FOR_CALLING = ("for", "calling")
_NOT_THANKS = frozenset({"sorry", "apologize", "apologise", "apologies", "reason"})
#: How a speech menu opens its first prompt when its welcome is lost.
_STARTED = ("to", "get", "started")
_TELL_WHY = tuple(
    tuple(p.split())
    for p in ("tell me why", "tell us why", "tell me what you are calling", "briefly tell me")
)


#: The party lost but what we did to it ("I'm a welcome, you are calling in for stuff,
#: or upside the camera in your rear, please call later." for "The mobile phone you
#: are calling is switched off or outside the coverage area. Please call later."):
#: only a state nobody says of a person follows it (:data:`_STATE_OF_A_LINE`); "you
#: are calling the wrong number, he no longer lives here" is a person's.
_WHOM_WE_CALL = "you are calling"
#: How carrier announcements name the party that was called.
_PARTY: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "the number you",
        "the subscriber",
        "a subscriber",
        "the customer",
        "the wireless customer",
        "the cellular customer",
        "the mobile",
        "the party you",
        "the person you",
        "this number",
        # the noun kept, what came before it lost ("The word of customer you are
        # calling is not available, please try your calling later.")
        "customer you",
        "subscriber you",
        _WHOM_WE_CALL,
    )
)
#: Words between "the <party> you" and the verb: "you have dialed", "you can dial".
_AUX = frozenset({"have", "are", "can", "had", "were"})
_CALL_VERBS = frozenset({"called", "calling", "call", "reached"})


def _dials(token: str) -> bool:
    """ "dial", "dialed", or what the recogniser keeps of it: the rime survives ("file",
    "smile")."""
    return token in _CALL_VERBS or token.endswith(("ile", "iled", "ial", "ialed", "ialled"))


def _dialled_party(tokens: Sequence[str], i: int) -> tuple[tuple[str, ...], ...]:
    """The party named by what we did to it, its noun lost: "the primer you can dial",
    "the primer you can file" (whisper's "the number you have dialed"), or its
    adjective lost beside the noun: "the normal phone you are calling" (whisper's "the
    mobile phone you are calling", a female espeak-ng voice)."""
    if i + 3 >= len(tokens) or tokens[i] != "the":
        return ()
    you = next((j for j in (i + 2, i + 3) if tokens[j] == "you"), None)
    if you is None or you + 1 >= len(tokens):
        return ()
    verb = you + 2 if tokens[you + 1] in _AUX else you + 1
    if verb >= len(tokens) or not _dials(tokens[verb]):
        return ()
    return (tuple(tokens[i : verb + 1]),)


#: What carriers say about the party that ends the call, and nobody says of a person:
#: what may follow the party when only "you are calling" is left of it.
_STATE_OF_A_LINE: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "cannot be reached",
        "could not be reached",
        "not reachable",
        "try again later",
        "try your call again",
        # "try your call again later", "again" lost ("please try your calling later")
        "try your {w} later",
        "please call later",
        "call again later",
        "switched off",
        "switch off",
        "turned off",
        "coverage area",
    )
)
#: What carriers say about that party that ends the call. "Not available" is
#: not among them: carrier voicemail says it too, before "record your message",
#: and the recogniser may hand that second sentence over as a turn of its own.
#: Beside a line's states, some a person says too ("he no longer lives here").
_STATE: tuple[tuple[str, ...], ...] = _STATE_OF_A_LINE + tuple(
    tuple(p.split())
    for p in (
        "try again",
        "dial again",
        "restricted",
        "not valid",
        "not a valid",
        "been changed",
        "disconnected",
        "disconnecting",
        "customer request",
        "customers request",
        "no longer",
        "out of service",
        "not in service",
    )
)


#: Carrier states nobody answering a call says of the line they answer on: with an
#: apology they are an intercept even when the party's words were lost ("I'm sorry,
#: this humbles and being temporarily disconnected at a customer request").
_INTERCEPT_ONLY: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "been disconnected",
        "temporarily disconnected",
        "customer request",
        "customers request",
        "not in service",
        "no longer in service",
    )
)
#: "This number has been disconnected" as the recogniser may leave it: "The number
#: of being disconnected", "The number can be disconnected" (whisper tiny.en lost
#: the sentence in seven of 13 voices, three of them so). A number named bare is a
#: party only with a state nobody says of the line they answer on, close after it.
_BARE_NUMBER = ("the", "number")
_BARE_NUMBER_STATES = (*_INTERCEPT_ONLY, ("disconnected",), ("out", "of", "service"))
_APOLOGIES: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split()) for p in ("we are sorry", "i am sorry", "sorry")
)
#: The line named right after the apology, as a carrier goes on to its state: "I'm
#: sorry, this number has been temporarily disconnected" as whisper tiny.en left it in
#: two female espeak-ng voices ("I'm sorry, this number has been since we really
#: can't see that ..."), the state lost where the frame survived.
_NUMBER_HAS_BEEN: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split()) for p in ("this number has been", "the number has been")
)


def _state_in(tokens: Sequence[str], states: tuple[tuple[str, ...], ...]) -> tuple[str, ...] | None:
    """The first of ``states`` said in ``tokens``, or None."""
    return next(
        (state for j in range(len(tokens)) for state in states if _prompt_at(tokens, j, state)),
        None,
    )


def _apology_then_state(tokens: Sequence[str]) -> list[Cue]:
    """The turn opens with an apology and, within 20 words, a state only a carrier
    announces ("I'm sorry, ... has been disconnected at the customer's request"), or
    right after it the number and "has been" (:data:`_NUMBER_HAS_BEEN`)."""
    opener = next((a for a in _APOLOGIES if _prompt_at(tokens, 0, a)), None)
    if opener is None:
        return []
    state = _state_in(tokens[len(opener) : len(opener) + 20], _INTERCEPT_ONLY)
    if state is not None:
        return [("machine-unavailable", f"carrier: an apology ... {' '.join(state)}", 0, DAMAGED)]
    if any(_prompt_at(tokens, len(opener), line) for line in _NUMBER_HAS_BEEN):
        # nobody who answers opens by apologising for the state of the line they
        # answer on
        return [("machine-unavailable", "carrier: an apology, the number has been", 0, DAMAGED)]
    return []


#: How the recogniser keeps "messages" when it loses the word: its first syllable
#: ("meaning", "mechanism", "medicine", "material" in four female espeak-ng voices),
#: which "message" and "messages" share.
_MESSAGE_ONSETS = ("me", "ma")


def _message_like(word: str) -> bool:
    return len(word) >= 6 and word.startswith(_MESSAGE_ONSETS)


def _refuses_messages(tokens: Sequence[str]) -> list[Cue]:
    """A full mailbox's refusal with its mailbox lost: "... and cannot <verb> any
    <messages>" ("Let my option fall and cannot have had any meaning at this time"
    for "The mailbox is full and cannot accept any messages at this time"). A mailbox
    that takes messages does not say it cannot take any; one that says so while it
    asks for one is voicemail (the phrase gate drops a carrier's cue then)."""
    for i in range(len(tokens) - 3):
        if tokens[i : i + 2] != ["and", "cannot"]:
            continue
        for j in range(i + 2, min(len(tokens) - 1, i + 5)):
            if tokens[j] == "any" and _message_like(tokens[j + 1]):
                return [("machine-unavailable", "carrier: and cannot ... any messages", i, DAMAGED)]
    return []


def carrier_cues(tokens: Sequence[str]) -> list[Cue]:
    """Carrier-intercept evidence: the called party named, then what is wrong with it;
    an apology, then a state only a carrier announces; or a mailbox's refusal of any
    message.

    Returned as strong ``machine-unavailable``; the phrase gate drops it when the
    same recording offers to take a message (carrier voicemail opens the same way).
    """
    tokens = canonical_words(tokens)
    for i in range(len(tokens)):
        for party in (*_PARTY, *_dialled_party(tokens, i)):
            if not _prompt_at(tokens, i, party):
                continue
            # the state may come a sentence later ("The mobile phone you are calling
            # is switched off or outside the coverage area. Please call later.")
            states = _STATE_OF_A_LINE if " ".join(party) == _WHOM_WE_CALL else _STATE
            state = _state_in(tokens[i + len(party) : i + len(party) + 20], states)
            if state is not None:
                label = f"carrier: {' '.join(party)} ... {' '.join(state)}"
                return [("machine-unavailable", label, i, 1.0)]
    for i in range(len(tokens)):
        if _prompt_at(tokens, i, _BARE_NUMBER):
            state = _state_in(tokens[i + 2 : i + 7], _BARE_NUMBER_STATES)
            if state is not None:
                label = f"carrier: the number ... {' '.join(state)}"
                return [("machine-unavailable", label, i, DAMAGED)]
    return _apology_then_state(tokens) or _completed_as_dialed(tokens) or _refuses_messages(tokens)


_DIALED = frozenset({"dial", "dialed", "dialled"})


def _completed_as_dialed(tokens: Sequence[str]) -> list[Cue]:
    """ "Completed" and, within two words, "dial(ed)": what survives of "your call could
    not be completed as dialed" ("you're talking about the completed dial"). Only a
    carrier speaks of a call completed as dialled; "I completed the file" is no dial."""
    for j, tok in enumerate(tokens):
        if tok == "completed" and _DIALED & set(tokens[j + 1 : j + 3]):
            return [("machine-unavailable", "carrier: completed ... dialed", j, DAMAGED)]
    return []


#: Words before "your name" that make it a voicemail's ask, not a screener's.
_TAKES_A_MESSAGE = frozenset({"leave", "and", "with", "plus"})


def screener_cues(tokens: Sequence[str]) -> list[Cue]:
    """A screener's ask for our name alone, timed by its tone: "<verb> your name after".

    Whisper loses the verb and the tone ("Please hear your name after my phone" for
    "Please say your name after the tone"); what survives is a name asked for on its
    own, before a tone. A voicemail asks to *leave* the name, and with the number.
    """
    for i in range(1, len(tokens) - 3):
        if (
            tokens[i : i + 2] == ["your", "name"]
            and tokens[i + 2] in ("after", "at")
            and tokens[i + 3] in FUNCTION_WORDS  # "after the/my ..." ("at all" is a question)
            and tokens[i - 1] not in _TAKES_A_MESSAGE
        ):
            return [("machine-screening", "screener: your name after the tone", i - 1, 0.9)]
    return []
