"""Reading an IVR menu and choosing the key that leads toward a goal.

Pure functions. :func:`menu_options` finds "press N for X" / "for X, press N"
options in a menu transcript; :func:`choose_option` scores them against the
call's goal (free text such as ``"billing"`` or ``"prescription refill"``) and
falls back to the options that reach a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .menu_shapes import NUMBER_WORDS, is_press_like
from .phrases import misheard_keys
from .tolerance import SOUND_ALIKE, word_quality

__all__ = [
    "MenuOption",
    "menu_options",
    "choose_option",
    "repair_key_verbs",
    "PERSON_GOAL",
    "SEND_GOAL",
]

#: What "reach a person" looks like in menu options.
PERSON_GOAL = (
    "representative operator agent person someone associate customer service support staff "
    "speak talk"
)
#: What a voicemail's post-message menu option to deliver the message looks like.
SEND_GOAL = "send deliver finish save done"

#: Spoken keys: the digits, plus "oh" for zero and the symbol keys.
_DIGIT_WORDS = {**NUMBER_WORDS, "oh": "0", "pound": "#", "hash": "#", "star": "*"}
_KEY = r"(\d|#|\*|zero|oh|one|two|three|four|five|six|seven|eight|nine|pound|hash|star)"
_PRESS = re.compile(rf"\b(?:press|dial|enter|push|select)\s+(?:the\s+)?{_KEY}\b(?:\s+key)?")
_STOP = frozenset(
    "a an the to for of and or if you your are is be with on in about our we please press "
    "dial now at this that it any all other calling call".split()
)


_VERBS = ("press", "dial", "push", "select", "enter")
#: a word right before a key (or glued to a digit) that may be a damaged key verb
_BEFORE_KEY = re.compile(
    r"\b([a-z]{3,})(?:\s+|-|(?=\d))(?=(?:\d|zero|oh|one|two|three|four|five|six|seven|eight|nine"
    r"|pound|hash|star|to|too|for|won|tree|ate)\b)"
)


def repair_key_verbs(text: str) -> str:
    """Lower-cased ``text`` with key verbs the recogniser damaged restored, only right
    before a key: "Preth one" -> "press one", "pref1" -> "press 1" (amd/tolerance.py),
    "Pre-2", "pray for", "brave one" -> "press" (amd/menu_shapes.py).

    The phrase packs score such damage at a lower strength; the menu reader needs
    the keys themselves, or the agent presses nothing.
    """

    def repair(m: re.Match[str]) -> str:
        word = m.group(1)
        if word in _VERBS:
            return m.group(0)
        verb = next((v for v in _VERBS if word_quality(word, v) >= SOUND_ALIKE), None)
        if verb is None and is_press_like(word):
            # "Pre-1", "pret2", "pray for", "brave one": this is read only once the
            # call is a menu, where a verb-like word before a key is the key verb
            verb = "press"
        return f"{verb} " if verb else m.group(0)

    return _BEFORE_KEY.sub(repair, text.lower())


@dataclass(frozen=True)
class MenuOption:
    digit: str
    description: str


def _key(word: str) -> str:
    return _DIGIT_WORDS.get(word, word)


def menu_options(text: str) -> list[MenuOption]:
    """The options of a menu, in the order they were offered (first mention of a digit wins).

    Works with or without punctuation (speech recognisers often drop it): the
    text is cut at each "press N"; if words follow the last key ("press 2 for
    support") each key's description is what follows it, otherwise ("for
    support, press 2") what precedes it; which convention a menu uses is read
    from its end ("... press 3" with nothing after means descriptions come
    first). Sentence punctuation, when present,
    bounds each description.
    """
    low = misheard_keys(repair_key_verbs(text))
    hits = list(_PRESS.finditer(low))
    if not hits:
        return []
    chunks = [low[: hits[0].start()]]
    chunks += [
        low[h.end() : (hits[i + 1].start() if i + 1 < len(hits) else len(low))]
        for i, h in enumerate(hits)
    ]
    tail = re.split(r"[.;!?,]", chunks[-1].strip())[0].split()
    after = bool(tail) and tail[0] in ("for", "to", "if", "when")
    options: list[MenuOption] = []
    for i, hit in enumerate(hits):
        if after:
            desc = re.split(r"[.;!?,]", chunks[i + 1].strip())[0]
            if not _words(desc):  # "for sales, press 1. press 2 for support": mixed
                desc = _last_sentence(chunks[i])
        else:
            desc = _last_sentence(chunks[i])
        options.append(MenuOption(_key(hit.group(1)), " ".join(desc.split()).strip(" ,")))
    seen: set[str] = set()
    unique = []
    for opt in options:
        if opt.digit not in seen:
            seen.add(opt.digit)
            unique.append(opt)
    return unique


def _last_sentence(text: str) -> str:
    """The last sentence of ``text`` that has words in it."""
    pieces = [p for p in re.split(r"[.;!?]", text) if _words(p)]
    return pieces[-1] if pieces else ""


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']+", text) if w not in _STOP]


def _stem(word: str) -> str:
    return word[:5]


def _score(desc: str, goal: str) -> int:
    want = {_stem(w) for w in _words(goal)}
    return sum(1 for w in set(_words(desc)) if _stem(w) in want)


def choose_option(
    options: list[MenuOption], goal: str, *, fallbacks: tuple[str, ...] = (PERSON_GOAL, "english")
) -> str | None:
    """The digit whose description best matches ``goal``, else the first fallback that fits.

    Options that repeat the menu or go back are never chosen.
    """
    usable = [
        o
        for o in options
        if not re.search(r"\b(repeat|again|previous|main menu|re-?record)\b", o.description)
    ]
    # then a person, then English in a language menu (the agent's language)
    for wanted in (goal, *fallbacks):
        if not wanted.strip():
            continue
        scored = [(_score(o.description, wanted), -i, o) for i, o in enumerate(usable)]
        scored = [s for s in scored if s[0] > 0]
        if scored:
            return max(scored, key=lambda s: (s[0], s[1]))[2].digit
    return None
