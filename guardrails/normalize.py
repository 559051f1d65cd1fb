"""Undo the spellings people use to slip words past a filter, before any matching.

:func:`deobfuscate` maps text that was written to look like ordinary words onto
those words: Unicode compatibility forms and look-alike letters from other
scripts become ASCII letters ("ｉｄｉｏｔ", Cyrillic "іdіоt"), accents and
zero-width characters go, leetspeak inside a word becomes letters ("h4te",
"1d10t", "$tupid"; numbers stay numbers), runs of three or more of one letter
become one ("stuuupid"), dots, dashes and stars inside a word go ("f.u.c.k",
"id-iot"), and runs of three or more single letters
separated by spaces are joined ("h a t e"). Case is kept; callers lowercase.

It is pure string work (no I/O), used by the rule packs' ``words`` normalisation
and by the learned backend's features.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

KNOWN_WORDS: Path = Path(__file__).with_name("data") / "known_words.txt"

__all__ = ["correct_typos", "deobfuscate", "typo_map"]

# letters of other scripts that look like Latin ones (the common confusables)
_CONFUSABLES = {
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "ո": "n", "ս": "u", "ᴀ": "a", "ʙ": "b", "ᴄ": "c",
    "ᴅ": "d", "ᴇ": "e", "ɢ": "g", "ʜ": "h", "ɪ": "i", "ᴊ": "j", "ᴋ": "k", "ʟ": "l",
    "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u",
    "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z", "α": "a", "β": "b", "ε": "e", "η": "n",
    "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "У": "Y", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "Α": "A",
    "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
}  # fmt: skip
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_TABLE = str.maketrans({**_CONFUSABLES, **{chr(k): v for k, v in _ZERO_WIDTH.items()}})

_LEET = str.maketrans({"4": "a", "@": "a", "3": "e", "1": "i", "!": "i", "0": "o",
                       "5": "s", "$": "s", "7": "t", "+": "t", "8": "b", "9": "g"})  # fmt: skip
# a token of letters and leet characters with at least one letter and one leet
# character inside it (not a number, not "5pm" read as "spm": a digit run that
# starts the token and is followed only by letters is a quantity)
_TOKEN = re.compile(r"[a-zA-Z0-9@$!+]+")
_HAS_LETTER = re.compile(r"[a-zA-Z]")
_QUANTITY = re.compile(r"^\d+(?:st|nd|rd|th|s|am|pm|k|m|g|gb|mb|kg|km|mm|cm|x|h|min)?$", re.I)
_REPEATS = re.compile(r"([a-zA-Z])\1{2,}")
_INNER_MARKS = re.compile(r"(?<=[a-zA-Z])[.\-_~'`](?=[a-zA-Z])")
_SPACED = re.compile(r"\b(?:[a-zA-Z] ){2,}[a-zA-Z]\b")


def _unleet(found: re.Match[str]) -> str:
    token = found.group(0)
    if not _HAS_LETTER.search(token) or _QUANTITY.match(token) or token.isalpha():
        return token
    inner = token.strip("!")  # "stop!" is not "stopi"
    if inner.isalpha():
        return token
    head, tail = token[: len(token) - len(token.lstrip("!"))], token[len(token.rstrip("!")) :]
    return head + inner.translate(_LEET) + tail


def _join_letters(found: re.Match[str]) -> str:
    letters = found.group(0).split()
    if len(letters) >= 4 and letters[0] in ("I", "A"):  # "I h a t e": the word "I"
        return letters[0] + " " + "".join(letters[1:])
    return "".join(letters)


def deobfuscate(text: str) -> str:
    """Map obfuscated spellings onto plain words.

    Args:
        text: Any text.

    Returns:
        The text with look-alike characters, leetspeak, stretched letters, marks
        inside words and spaced-out letters undone. Ordinary text comes back
        unchanged apart from Unicode compatibility forms and accents.
    """
    if text.isascii():
        plain = text
    else:
        folded = unicodedata.normalize("NFKD", text.translate(_TABLE))
        plain = "".join(c for c in folded if not unicodedata.combining(c))
    plain = _INNER_MARKS.sub("", plain)
    plain = _TOKEN.sub(_unleet, plain)
    plain = _REPEATS.sub(r"\1", plain)
    if " " in plain:
        plain = _SPACED.sub(_join_letters, plain)
    return plain


@cache
def _known_words() -> frozenset[str]:
    if not KNOWN_WORDS.is_file():
        return frozenset()
    return frozenset(KNOWN_WORDS.read_text(encoding="utf-8").split())


def _slips(word: str) -> set[str]:
    out = set()
    if len(word) >= 4:
        out |= {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
    if len(word) >= 5:
        out |= {word[:i] + word[i + 1 :] for i in range(len(word))}
    return out


def typo_map(
    words: Iterable[str], keep: Iterable[str] = (), stems: Iterable[str] = ()
) -> dict[str, str]:
    """Misspellings one slip away from ``words`` (single lowercase words), to the word.

    A swap of two neighbouring letters (words of four letters or more) or one letter
    left out (five or more) maps back, unless the result is a common word
    (``guardrails/data/known_words.txt``) or a slip of two different words. A letter
    added is found at lookup (:func:`correct_typos`) under the key ``+`` plus the word,
    a word glued to a common word under ``=`` plus the word, and the ``keep`` words
    (left as they are) under ``!`` plus the word.

    Args:
        words: The words to protect.
        keep: Other words that are never taken for a slip (the rest of the pack's words).
        stems: Word beginnings (``idiot*``) whose words are never split either.

    Returns:
        Misspelling -> word; empty (no tolerance) when the common-word list is missing.
    """
    known = _known_words()
    if not known:  # without the common words a slip could turn "back" into "black"
        return {}
    targets = {w.lower() for w in words if w.isalpha() and len(w) >= 4}
    known = known | {w.lower() for w in keep}
    found: dict[str, str] = {}
    clash: set[str] = set()
    for word in sorted(targets):
        for slip in _slips(word):
            if slip in targets or slip in known:
                continue
            if found.get(slip, word) != word:
                clash.add(slip)
            found[slip] = word
        if len(word) >= 5:
            found["+" + word] = word
        found["=" + word] = word
    for slip in clash:
        del found[slip]
    found.update({"!" + w.lower(): w.lower() for w in keep})
    found.update({"*" + w.lower(): w.lower() for w in stems})
    return found


_SHORT = frozenset("i a to of in on at be so my we me no do go is am an as by or".split())
_TOKEN_WORD = re.compile(r"[a-z]{4,}")  # shorter words are left alone


def correct_typos(text: str, typos: Mapping[str, str]) -> str:
    """Replace each lowercase word of ``text`` that is a known slip of a protected word,
    and split one glued to a common word ("ihate" is "i hate").

    Args:
        text: Normalised (lowercase) text.
        typos: A map from :func:`typo_map`.

    Returns:
        The text with those words replaced.
    """
    known = _known_words()

    def fix(found: re.Match[str]) -> str:
        token = found.group(0)
        if token in known or ("+" + token) in typos or ("!" + token) in typos:
            return token
        hit = typos.get(token)
        if hit is not None:
            return hit
        if len(token) >= 6:  # one letter added
            for i in range(len(token)):
                hit = typos.get("+" + token[:i] + token[i + 1 :])
                if hit is not None:
                    return hit
        stemmed = any(("*" + token[:k]) in typos for k in range(3, len(token) + 1))
        if ("=" + token) not in typos and not stemmed:  # a space left out: "ihate"
            for i in range(1, len(token) - 2):
                left, right = token[:i], token[i:]
                if ("=" + right) in typos and (left in known or left in _SHORT):
                    return f"{left} {right}"
                if ("=" + left) in typos and right in known and len(right) >= 3:
                    return f"{left} {right}"
        return token

    return _TOKEN_WORD.sub(fix, text)
