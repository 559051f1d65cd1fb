"""Reading an IVR menu and choosing the key that leads toward a goal.

Pure functions. :func:`menu_options` finds "press N for X" / "for X, press N"
options in a menu transcript; :func:`choose_option` scores them against the
call's goal (free text such as ``"billing"`` or ``"prescription refill"``) and
falls back to the options that reach a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MenuOption", "menu_options", "choose_option", "PERSON_GOAL", "SEND_GOAL"]

#: What "reach a person" looks like in menu options.
PERSON_GOAL = (
    "representative operator agent person someone associate customer service support staff"
)
#: What a voicemail's post-message menu option to deliver the message looks like.
SEND_GOAL = "send deliver finish save done"

_DIGIT_WORDS = {
    "zero": "0",
    "oh": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "pound": "#",
    "hash": "#",
    "star": "*",
}
_KEY = r"(\d|#|\*|zero|oh|one|two|three|four|five|six|seven|eight|nine|pound|hash|star)"
_PRESS = re.compile(rf"\b(?:press|dial|enter|push|select)\s+(?:the\s+)?{_KEY}\b(?:\s+key)?")
_STOP = frozenset(
    "a an the to for of and or if you your are is be with on in about our we please press "
    "dial now at this that it any all other calling call".split()
)


@dataclass(frozen=True)
class MenuOption:
    digit: str
    description: str


def _key(word: str) -> str:
    return _DIGIT_WORDS.get(word, word)


def menu_options(text: str) -> list[MenuOption]:
    """The options of a menu, in the order they were offered (first mention of a digit wins)."""
    clauses = [c.strip() for c in re.split(r"[.;!?,]", text.lower()) if c.strip()]
    options: list[MenuOption] = []
    pending = ""
    for clause in clauses:
        hits = list(_PRESS.finditer(clause))
        if not hits:
            pending = clause
            continue
        for i, hit in enumerate(hits):
            after_end = hits[i + 1].start() if i + 1 < len(hits) else len(clause)
            after = clause[hit.end() : after_end].strip()
            before = clause[: hit.start()].strip() if i == 0 else ""
            desc = after if _words(after) else (before if _words(before) else pending)
            options.append(MenuOption(_key(hit.group(1)), desc))
        pending = ""
    seen: set[str] = set()
    unique = []
    for opt in options:
        if opt.digit not in seen:
            seen.add(opt.digit)
            unique.append(opt)
    return unique


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']+", text) if w not in _STOP]


def _stem(word: str) -> str:
    return word[:5]


def _score(desc: str, goal: str) -> int:
    want = {_stem(w) for w in _words(goal)}
    return sum(1 for w in set(_words(desc)) if _stem(w) in want)


def choose_option(
    options: list[MenuOption], goal: str, *, fallback: str = PERSON_GOAL
) -> str | None:
    """The digit whose description best matches ``goal``, else ``fallback``, else None.

    Options that repeat the menu or go back are never chosen.
    """
    usable = [
        o
        for o in options
        if not re.search(r"\b(repeat|again|previous|main menu|re-?record)\b", o.description)
    ]
    # a language menu first: English (the agent's language) when nothing else fits
    for wanted in (goal, fallback, "english"):
        if not wanted.strip():
            continue
        scored = [(_score(o.description, wanted), -i, o) for i, o in enumerate(usable)]
        scored = [s for s in scored if s[0] > 0]
        if scored:
            return max(scored, key=lambda s: (s[0], s[1]))[2].digit
    return None
