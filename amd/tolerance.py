"""How far a recognised word may be from the word that was said, and still count.

Pure functions. Whisper tiny.en on synthetic and accented voices over an 8 kHz
line makes a few kinds of mistakes again and again (collected from replays of
the AMD suite in Piper and espeak-ng voices, docs/amd.md):

* **fricatives and sibilants swap**: "press" is written "preth", "pref" or
  "prez"; "say" comes out as "thay". s, z, th, f, sh and ph are one class;
  doubled letters count once;
* **the onset is lost or replaced** while the rest of the word survives:
  "hold" -> "fold", "tone" -> "phone", "say" -> "pay", "stay" -> "pay";
* **small function words are swapped**: "leave *a* message" -> "leave *my*
  message", "*the* subscriber" -> "*a* subscriber";
* **a key is glued to its verb**: "Pref1" for "press 1".

:func:`word_quality` scores one recognised token against one expected word
(1.0 exact, lower for each kind of damage, 0.0 for no match);
:func:`split_glued` undoes the gluing. Callers allow at most one damaged word
per phrase, so the rules stay general without matching everything.
"""

from __future__ import annotations

import re

__all__ = ["FUNCTION_WORDS", "sound_key", "split_glued", "word_quality"]

#: Quality of a word whose sounds match once fricatives are merged.
SOUND_ALIKE = 0.9
#: Quality of a word that differs only in its onset.
ONSET = 0.85
#: Quality of a function word swapped for another.
FUNCTION_SWAP = 0.9

#: Short words a recogniser swaps for one another without changing the phrase.
FUNCTION_WORDS = frozenset(
    {"a", "an", "the", "my", "your", "our", "his", "her", "their", "this", "that"}
)
_VOWELS = "aeiouy"
_GLUED = re.compile(r"^([a-z]{3,})([0-9]+)$")


def sound_key(word: str) -> str:
    """The word's letters with fricatives merged and doubled letters once ("preth" -> "pres")."""
    w = word.replace("ph", "f").replace("th", "s").replace("sh", "s")
    w = w.replace("f", "s").replace("z", "s").replace("ck", "k").replace("c", "k")
    return re.sub(r"(.)\1+", r"\1", w)


def _rime(word: str) -> str:
    for i, c in enumerate(word):
        if c in _VOWELS:
            return word[i:]
    return word


def word_quality(token: str, word: str) -> float:
    """How well a recognised ``token`` stands for the expected ``word`` (0.0 to 1.0).

    Exact is 1.0. Otherwise: same sounds once fricatives are merged (at least 4
    letters: "preth" for "press"), the same word after its onset (at least 3
    letters, the rest at least 2: "fold" for "hold", "pay" for "say"),
    or both function words. Digits and keys only match exactly.
    """
    if token == word:
        return 1.0
    if not token.isalpha() or not word.isalpha():
        return 0.0
    if token in FUNCTION_WORDS and word in FUNCTION_WORDS:
        return FUNCTION_SWAP
    if min(len(token), len(word)) >= 4 and sound_key(token) == sound_key(word):
        return SOUND_ALIKE
    rime = _rime(word)
    if (
        len(word) >= 3
        and len(rime) >= 2
        and rime != word
        and _rime(token) == rime
        and token != rime
        and len(token) <= len(word) + 1
    ):
        return ONSET
    return 0.0


def split_glued(tokens: list[str]) -> list[str]:
    """Splits a key glued to its verb ("pref1" -> "pref", "1")."""
    out: list[str] = []
    for t in tokens:
        m = _GLUED.match(t)
        out.extend(m.groups() if m else (t,))
    return out
