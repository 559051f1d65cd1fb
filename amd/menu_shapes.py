"""Menus the recogniser garbled, recognised by what survives of their structure.

Pure functions over :func:`amd.phrases.words`. Whisper tiny.en on slow or
accented synthetic voices over an 8 kHz line rarely keeps a menu's words, but
it keeps its shape (collected from replays of the AMD suites in espeak-ng
voices and from menus written for the purpose and never replayed, docs/amd.md):

* **the key verb is heard as something else, the same way each time**: "Pre-1
  for existing patients, Pre-2 for billing", "pray for", "brave one", "great
  one", even "3-1, 3-2, 3-3". A menu repeats its verb before each key, so a
  verb-like word (a stop, then "r", then a front vowel: "pre", "pray",
  "brave", "great", "breast") before two different keys is two options, and
  any word before three keys counted up in order (1, 2, 3) is a list of
  options (a word, not a digit: "3 1 3 2 3 3" may be a phone number);
* **the keys are heard as homophones**: "press to", "pray for", "pre tree";
* **any word said before two different keys after a purpose** is the verb:
  "for appointments, now one ... now to" ("dial" heard as "now");
* **the options keep their parallel frame** when verb and key are both lost: "For
  checking and savings, pray one. For 3d card, 3d food.", "If you have a new
  patient, see you later on. If you have an existing patient, see you later."
  (:func:`parallel_options`, read from the text: it needs the sentences);
* **an option whose opener was lost keeps its clause**: a purpose of three words,
  a comma, then a clause of only "press" and a key ("Make the check-out order,
  press one." for "To check on an order, press one."; :func:`parallel_options`);
* **directory prompts keep their frame**: "if you know ... extension" (or "your
  ... next session", whisper's "extension"), "for
  doctor Patel ... extension ... 4", "reach
  someone by name", "the first three ... of the last name", "say the name on
  the person", "say ... name ... you would like to reach" (a screener asks for
  *your* name, never the name of the person or department you want); and a
  data-entry prompt's end, "followed by ... sign", its key lost.

One damaged option is no evidence: a person may say "great, one for you".
Every cue here needs two options, one option and the way menus end ("for all
other calls, please stay on the line"), one option in an option's frame ("For
elaborate notes, presto!": an opener, a comma, then the verb and key), or a
prompt's frame, and is returned a little
weaker than the same cue heard as said (:data:`DAMAGED`), still strong enough
to decide a turn and to correct a provisional person who spoke before us.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "DAMAGED",
    "NUMBER_WORDS",
    "damaged_menu_cues",
    "glued_key",
    "is_press_like",
    "keyed_option",
    "parallel_options",
]

Cue = tuple[str, str, int, float]

#: Strength of a menu recognised from a damaged shape.
DAMAGED = 0.9

#: The key verbs as said.
_VERBS = frozenset({"press", "dial", "push", "select", "choose", "enter", "hit", "touch"})
#: What the recogniser writes for "press": p, b or g, "r", a front vowel, and at
#: most four more letters ("pre", "prez", "pray", "brave", "great", "breast",
#: "print").
_PRESS_LIKE = re.compile(r"^[pbg]r(e|a|ai|ay|ea|ei|i)[a-z]{0,4}$")
#: Number words the recogniser writes as other words when a key follows a verb.
_KEY_HOMOPHONES = {
    "won": "1",
    "run": "1",
    "to": "2",
    "too": "2",
    "tree": "3",
    "free": "3",
    "through": "3",
    "for": "4",
    "fore": "4",
    "fife": "5",
    "sex": "6",
    "ate": "8",
    "nein": "9",
    "oh": "0",
}
_KEY_WORDS = frozenset({"pound", "star", "hash", "zero"})
#: Keys written as words, for every reader of keys (amd/phrases.py, amd/ivr.py). Here
#: ("Great One") they are read as keys only in an option's frame, where nothing else
#: follows the verb (elsewhere "great one" is a person's praise).
NUMBER_WORDS: dict[str, str] = {
    w: str(d) for d, w in enumerate("zero one two three four five six seven eight nine".split())
}
#: Key homophones too common to mark one option on their own ("great to", "pray for").
_COMMON_WORD_KEYS = frozenset({"to", "too", "for", "fore"})
#: "press" glued to a key written as a word ("presto", "prefto": "press two"); the
#: shortest stem that leaves a key is taken ("pretty" and "prefer" leave none).
_GLUED_KEY = re.compile(
    r"^([pb]r(?:e|a|ai|ay|ea|ei|i)[a-z]{0,3}?)"
    r"(one|won|wan|uan|two|to|too|three|tree|free|four|for|fore)$"
)


def is_press_like(token: str) -> bool:
    """Whether ``token`` may be "press" as the recogniser heard it ("pre", "pray", "brave")."""
    return token in _VERBS or bool(_PRESS_LIKE.match(token))


def _key(token: str) -> str | None:
    if len(token) == 1 and token.isdigit():
        return token
    if token in _KEY_WORDS:
        return token
    return _KEY_HOMOPHONES.get(token)


def _key_id(token: str) -> str | None:
    """Which key ``token`` names, to tell two options apart: a homophone stands for
    itself ("pray through ... pray free" are two keys, whichever digits they were)."""
    key = _key(token)
    return token if key is not None and token in _KEY_HOMOPHONES else key


def glued_key(token: str) -> bool:
    """Whether ``token`` is "press" glued to a key written as a word ("presto",
    "prezuan": "press two", "press one")."""
    return _GLUED_KEY.match(token) is not None


def _unglued(tokens: Sequence[str]) -> tuple[list[str], list[int]]:
    """Tokens with a key glued to a press-like verb split off ("prefto" -> "pref",
    "to"), and for each the index of the token it came from."""
    out: list[str] = []
    where: list[int] = []
    for i, t in enumerate(tokens):
        m = _GLUED_KEY.match(t)  # its stem is press-like by construction
        parts = m.groups() if m else (t,)
        out.extend(parts)
        where.extend([i] * len(parts))
    return out, where


def _damaged_options(tokens: Sequence[str]) -> list[Cue]:
    """A verb-like word before two different keys: two options, whatever the verb became."""
    slots: dict[str, list[tuple[int, str]]] = {}
    for i in range(len(tokens) - 1):
        verb = tokens[i]
        if not is_press_like(verb):
            continue
        key = _key_id(tokens[i + 1])
        if key is None and verb == "pre" and len(tokens[i + 1]) <= 4:
            # "Pre-1", "pre-form", "pre-run": "pre" is no word of its own; a short
            # word after it is the key, however it was written ("pre-owned" is a word)
            key = tokens[i + 1]
        if key is not None:
            slots.setdefault(verb, []).append((i, key))
    for verb, found in slots.items():
        keys = {k for _, k in found}
        # "pre" twice is two options even when both keys came out alike ("pre-form")
        if len(keys) >= 2 or (verb == "pre" and len(found) >= 2):
            label = f"menu options: the key verb heard as {verb!r}"
            return [("machine-ivr", label, found[0][0], DAMAGED)]
    if (repeated := _repeated_word_options(tokens)) is not None:
        return [repeated]
    # the verb heard differently each time ("brave one ... pressed to ... pray for"):
    # still a menu when the keys differ and one of the verbs still starts like "press"
    every = sorted(slot for found in slots.values() for slot in found)
    keys = {k for _, k in every}
    if len(keys) >= 2 and any(v.startswith("pr") for v in slots):
        return [
            ("machine-ivr", "menu options: key verbs heard as other words", every[0][0], DAMAGED)
        ]
    return []


def _repeated_word_options(tokens: Sequence[str]) -> Cue | None:
    """Any word before two different keys, one a digit, with a purpose before it:
    "for appointments, now one ... now to" ("dial" heard as "now")."""
    found: dict[str, list[tuple[int, str]]] = {}
    for i in range(len(tokens) - 1):
        word, key = tokens[i], _key(tokens[i + 1])
        if key is None or not word.isalpha() or word in _NOT_VERBS:
            continue
        found.setdefault(word, []).append((i, key))
    for word, slots in found.items():
        keys = {k for _, k in slots}
        digits = {k for k in keys if k.isdigit() and k not in ("2", "4")} | {
            tokens[i + 1] for i, _ in slots if tokens[i + 1].isdigit()
        }
        purpose = any("for" in tokens[max(0, i - 4) : i] for i, _ in slots)
        if len(keys) >= 2 and digits and purpose:
            return (
                "machine-ivr",
                f"menu options: the key verb heard as {word!r}",
                slots[0][0],
                DAMAGED,
            )
    return None


#: Words that come before a number in ordinary speech, never a key verb.
_NOT_VERBS = frozenset(
    "a an the to for of and or at by in on is are was be it its this that my your our "
    "their his her about around after before until till from with than plus minus "
    "number extension room unit suite floor page step option press dial "
    "i me you we us he him she they them".split()
)


#: How menus end: what to do for anything the options did not name.
_MENU_CLOSE = tuple(
    tuple(p.split())
    for p in ("on the line", "all other", "other calls", "other questions", "to repeat", "hold for")
)


def _option_and_close(tokens: Sequence[str]) -> list[Cue]:
    """One whole option, verb damaged ("great one for appointments"), and a menu's close
    ("for all other calls, please stay on the line") in the same turn."""
    option = next(
        (
            i
            for i in range(len(tokens) - 2)
            if is_press_like(tokens[i])
            and _key(tokens[i + 1]) is not None
            and tokens[i + 1] not in _COMMON_WORD_KEYS
            and tokens[i + 2] in {"for", "to"}
        ),
        None,
    )
    if option is None:
        return []
    for i in range(option + 3, len(tokens)):
        if any(tuple(tokens[i : i + len(close)]) == close for close in _MENU_CLOSE):
            return [("machine-ivr", "menu: an option, then the menu's close", option, DAMAGED)]
    return []


def _counted_keys(tokens: Sequence[str]) -> list[Cue]:
    """One word before three keys counted up in order ("prez 1 ... prez 2 ... prez 3")."""
    after: dict[str, list[tuple[int, int]]] = {}
    for i in range(len(tokens) - 1):
        nxt = tokens[i + 1]
        # a word, not a digit: "3 1 3 2 3 3" is as likely a phone number
        if len(nxt) == 1 and nxt.isdigit() and not tokens[i].isdigit():
            after.setdefault(tokens[i], []).append((i, int(nxt)))
    for found in after.values():
        keys = list(dict.fromkeys(k for _, k in found))
        for a in range(len(keys) - 2):
            if keys[a + 1] == keys[a] + 1 and keys[a + 2] == keys[a] + 2:
                return [
                    (
                        "machine-ivr",
                        "menu options: keys counted up after one word",
                        found[0][0],
                        DAMAGED,
                    )
                ]
    return []


_PERSON_WANTED = frozenset({"person", "department", "party", "employee", "individual"})
_PREPOSITIONS = frozenset({"of", "on", "off", "in", "from", "for"})
_THREE = frozenset({"3", "three", "tree", "free"})


def _extension_like(token: str) -> bool:
    # "extension", "expansion": the recogniser keeps the word's ending
    return token.startswith("exten") or token.endswith("nsion")


def _next_session(tokens: Sequence[str], j: int) -> bool:
    # "extension" as whisper tiny.en heard it in two espeak-ng voices ("If you know
    # your early next session, ...", "... your party next session, ...")
    return tokens[j - 1 : j + 1] == ["next", "session"]


#: Verbs a directory asks for a name with ("please state the name of the party ...").
_NAME_VERBS = frozenset({"say", "enter", "spell", "state"})


def _directory(tokens: Sequence[str]) -> list[Cue]:
    cues: list[Cue] = []
    n = len(tokens)
    for i, tok in enumerate(tokens):
        if tok == "know" and tokens[max(0, i - 2) : i] == ["if", "you"]:
            # "if you know your party's extension" whatever became of "party's", or of
            # "extension" ("If you know your party next session, ..."): nobody asks
            # whether we know "our party" but a directory
            yours = tokens[i + 1 : i + 2] == ["your"]
            if any(_extension_like(t) for t in tokens[i + 1 : i + 6]) or (
                yours
                and (
                    tokens[i + 2 : i + 3] in (["party"], ["partys"], ["parties"])
                    # "next session" is two real words: only after "your"
                    or any(_next_session(tokens, j) for j in range(i + 3, min(n, i + 6)))
                )
            ):
                cues.append(("machine-ivr", "directory: if you know ... extension", i, DAMAGED))
        elif _extension_like(tok) and "for" in tokens[max(0, i - 6) : i]:
            # "for doctor Patel, dial extension 204": a purpose, then an extension number
            if any(
                (_key(t) is not None and t not in {"to", "for"}) or t[:1].isdigit()
                for t in tokens[i + 1 : i + 5]
            ):
                cues.append(("machine-ivr", "directory: for someone, an extension", i, DAMAGED))
        elif tok == "name" and i + 2 < n:
            # "say the name of the person": the person or department wanted, not yours
            rest = [t for t in tokens[i + 1 : i + 4] if t not in {"the", "a", "my", "your"}]
            asked = any(t in _NAME_VERBS for t in tokens[max(0, i - 3) : i])
            if asked and len(rest) >= 2 and rest[0] in _PREPOSITIONS and rest[1] in _PERSON_WANTED:
                cues.append(("machine-ivr", "directory: the name of the person", i, DAMAGED))
            elif (
                i >= 2
                and tokens[i - 1] in {"by", "my"}
                and tokens[i - 2] in {"someone", "dial", "search", "employee", "party"}
            ):
                cues.append(("machine-ivr", "directory: reach someone by name", i, DAMAGED))
        elif tok == "reach" and tokens[max(0, i - 2) : i] in (["like", "to"], ["wish", "to"]):
            # "say the name of the person or department you would like to reach", the
            # words between lost ("say my name I'm the person for the apartment you
            # would like to reach"): a name asked for, then whom we want to reach
            before = tokens[max(0, i - 16) : i - 2]
            asked = any(
                t == "name"
                and before[k - 1 : k] != ["your"]  # "say your name and who ...": ours
                and any(v in _NAME_VERBS for v in before[max(0, k - 3) : k])
                for k, t in enumerate(before)
            )
            if asked:
                cues.append(
                    ("machine-ivr", "directory: a name, then whom you would reach", i, DAMAGED)
                )
        elif (
            tok in {"follow", "followed"}
            and any(t in {"sign", "key"} for t in tokens[i + 1 : i + 5])
        ) or (tok == "following" and "sign" in tokens[i + 2 : i + 5]):
            # "followed by the pound sign", the key's name lost ("follow my mopone sign",
            # "following the phone sign"; "the following key points" is no key)
            cues.append(("machine-ivr", "data entry: followed by ... sign", i, DAMAGED))
        elif tok == "last" and i + 1 < n and tokens[i + 1] == "name":
            # "the first three letters of their last name", however "letters" came out
            window = tokens[max(0, i - 7) : i]
            if "first" in window and any(t in _THREE for t in window[window.index("first") + 1 :]):
                cues.append(
                    ("machine-ivr", "directory: the first letters of the last name", i, DAMAGED)
                )
    return cues


def keyed_option(tokens: Sequence[str]) -> bool:
    """Whether a key follows a word that may be a key verb ("breath one", "prefto",
    "press 2"): one option, too weak alone to call a menu (a person may say "great,
    one for you"), but a menu's mark in a long monologue."""
    split, _ = _unglued(tokens)
    if len(split) > len(tokens):
        return True  # a key glued to a press-like verb ("prefto")
    return any(
        is_press_like(split[i])
        and _key(split[i + 1]) is not None
        and split[i + 1] not in _COMMON_WORD_KEYS
        for i in range(len(split) - 1)
    )


def damaged_menu_cues(tokens: Sequence[str]) -> list[Cue]:
    """Menu evidence that survives the recogniser's damage (``machine-ivr`` at :data:`DAMAGED`).

    Args:
        tokens: One transcript's words (or a pair's, joined).

    Returns:
        ``(category, label, start word, strength)`` cues, possibly none.
    """
    split, where = _unglued(tokens)
    cues = [*_damaged_options(split), *_option_and_close(split), *_counted_keys(split)]
    return [
        *((category, label, where[start], strength) for category, label, start, strength in cues),
        *_directory(tokens),
    ]


_SENTENCE = re.compile(r"[^.!?;]+")
_INITIAL = re.compile(r"\b([A-Z])\.")
#: How a menu option opens: a purpose ("For billing,"), a condition ("If you are a
#: new patient,") or an aim ("To speak with an agent,").
_OPENERS = ("for", "if you", "to")


def _option_frame(sentence: str) -> str | None:
    """The opener of ``sentence`` when it is framed like a menu option: an opener and
    at most five more words, a comma, then at most five words (the verb and the key,
    whatever the recogniser made of them)."""
    head, comma, tail = sentence.partition(",")
    if not comma:
        return None
    head_words = re.findall(r"[a-z0-9']+", head.lower())
    tail_words = re.findall(r"[a-z0-9']+", tail.lower())
    if not 1 <= len(tail_words) <= 5 or not 2 <= len(head_words) <= 6:
        return None
    text = " ".join(head_words)
    for opener in _OPENERS:
        if text.startswith(opener + " ") and len(head_words) > len(opener.split()):
            return opener
    return None


def _pressed(sentence: str) -> bool:
    """Whether ``sentence`` is an option's purpose of three words or more, a comma,
    then "press" and at most three words, its key however it came out: "To speak with
    an operator, press Nero", "... press me a road" ("press zero"; whisper tiny.en,
    docs/amd.md, fourteenth round). "To be honest, press on, I'm listening" is no
    option: its tail goes on past a second comma."""
    head, _, tail = sentence.partition(",")
    if "," in tail or len(re.findall(r"[a-z0-9']+", head.lower())) < 3:
        return False
    tail_words = re.findall(r"[a-z0-9']+", tail.lower())
    return tail_words[:1] == ["press"] and 2 <= len(tail_words) <= 4


#: Verbs that take a key in a clause of their own, and the keys they take.
_CLAUSE_VERBS = frozenset({"press", "dial", "push"})
_CLAUSE_KEYS = frozenset({*NUMBER_WORDS, *NUMBER_WORDS.values(), "star", "pound"})


def _key_clause(sentence: str) -> bool:
    """Whether a clause of ``sentence`` is only "press" (or "dial", "push") and a key,
    after a clause of three words or more: an option whose opener was lost ("Make the
    check-out order, press one." for "To check on an order, press one."; "All time of
    the hour, press one, or ..." for "For pharmacy hours, press 1. For ..."). The key
    is a real key, said as a word of its own: "To be honest, press on" has none, and
    "Okay, press one" has no option before it. A menu's option never speaks as "I"
    ("I told you already, press one")."""
    clauses = [re.findall(r"[a-z0-9']+", c.lower()) for c in sentence.split(",")]
    return any(
        len(clauses[k - 1]) >= 3
        and not set(clauses[k - 1]) & {"i", "i'm", "im", "i've", "i'll"}
        and len(clauses[k]) == 2
        and clauses[k][0] in _CLAUSE_VERBS
        and clauses[k][1] in _CLAUSE_KEYS
        for k in range(1, len(clauses))
    )


def parallel_options(text: str) -> list[Cue]:
    """Two sentences in a row framed like menu options with the same opener, or one
    whose tail is a key verb and a key, however the verb came out.

    Read from the transcript's text, not its words: the frame is the sentence and
    its comma. One such sentence is no evidence ("For sure, go ahead."); a person
    answering a call does not open with two in a row, nor with "For billing, pray 3."

    Returns:
        A ``(category, label, start word, strength)`` cue at :data:`DAMAGED`, or none.
    """
    # an initial's full stop ends no sentence ("For Thomas E. Owen, ..."); the words
    # stay where they were
    text = _INITIAL.sub(r"\1 ", text)
    sentences = [m for m in _SENTENCE.finditer(text) if m.group().strip()]
    frames = [_option_frame(m.group().strip()) for m in sentences]
    for i in range(len(frames) - 1):
        if frames[i] is not None and frames[i] == frames[i + 1]:
            start = len(text[: sentences[i].start()].split())
            return [("machine-ivr", "menu options: two options framed alike", start, DAMAGED)]
    for sentence, frame in zip(sentences, frames, strict=True):
        if frame is None:
            if _key_clause(sentence.group()):
                start = len(text[: sentence.start()].split())
                return [("machine-ivr", "menu option: a purpose, then press a key", start, DAMAGED)]
            continue
        # one option, framed, whose tail is a key verb and a key however the verb
        # came out ("For elaborate notes, presto!", "For billing, Great One."):
        # the frame is what "great, one for you" lacks
        tail = sentence.group().partition(",")[2].lower()
        keys = [NUMBER_WORDS.get(t, t) for t in re.findall(r"[a-z0-9]+", tail)]
        if keyed_option(keys) or _pressed(sentence.group()):
            start = len(text[: sentence.start()].split())
            return [("machine-ivr", "menu option: framed, its key verb damaged", start, DAMAGED)]
    return []
