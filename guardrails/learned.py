"""A small learned text classifier per pack: hashed n-grams and a logistic regression.

Features are the character 3- to 5-grams and the word 1- and 2-grams of the text
after :func:`guardrails.normalize.deobfuscate` and lowercasing, hashed (CRC-32, so
the same on every run and machine) into ``DIM`` buckets, present or absent, the
vector scaled to unit length. A pack's model is one weight per bucket and a bias;
its probability is the logistic of their dot product. Scoring a sentence takes a
fraction of a millisecond on one core (numpy only).

A trained pack is a ``.npz`` file in ``guardrails/weights/`` (written by
``python -m guardrails.training``): ``weights`` (float16, ``DIM``), ``bias``,
``threshold`` (the probability chosen on the validation split) and ``anchor`` (the
score that threshold is mapped onto, the pack's usual decision threshold). The
calibrated score maps ``[0, threshold]`` linearly onto ``[0, anchor]`` and
``[threshold, 1]`` onto ``[anchor, 1]``, so a config rule ``abusive >= 0.7`` holds
exactly when the classifier is past its chosen operating point.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .normalize import deobfuscate

__all__ = ["DIM", "WEIGHTS_DIR", "LearnedPack", "features", "load_learned_packs"]

#: Hash buckets (a power of two).
DIM = 1 << 18
#: Where the trained packs live.
WEIGHTS_DIR: Path = Path(__file__).with_name("weights")
#: Characters of a text that are featurised (long texts are cut).
MAX_CHARS = 1500

_WORD = re.compile(r"[a-z0-9]+")


def features(text: str) -> npt.NDArray[np.int64]:
    """The sorted, distinct hash buckets of ``text``'s n-grams.

    Args:
        text: Any text.

    Returns:
        Bucket indices (each present once).
    """
    words = _WORD.findall(deobfuscate(text[:MAX_CHARS]).lower().replace("'", ""))
    if not words:
        return np.zeros(0, dtype=np.int64)
    joined = f" {' '.join(words)} "
    grams = [f"w{w}" for w in words]
    grams += [f"b{a} {b}" for a, b in zip(words, words[1:], strict=False)]
    for n in (3, 4, 5):
        grams += [f"c{joined[i : i + n]}" for i in range(len(joined) - n + 1)]
    mask = DIM - 1
    buckets = {zlib.crc32(g.encode()) & mask for g in grams}
    return np.fromiter(sorted(buckets), dtype=np.int64, count=len(buckets))


@dataclass(frozen=True)
class LearnedPack:
    """One pack's trained classifier.

    Attributes:
        name: The decision name it answers.
        weights: One weight per hash bucket.
        bias: The intercept.
        threshold: The probability chosen on the validation split.
        anchor: The calibrated score ``threshold`` maps onto.
    """

    name: str
    weights: npt.NDArray[np.float32]
    bias: float
    threshold: float
    anchor: float

    def probability(self, text: str) -> float:
        """The classifier's raw probability that ``text`` belongs to the pack."""
        idx = features(text)
        if idx.size == 0:
            z = self.bias
        else:
            z = float(self.weights[idx].sum()) / float(np.sqrt(idx.size)) + self.bias
        return float(1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0))))

    def calibrate(self, p: float) -> float:
        """Map a raw probability onto the pack's score scale (see the module docs)."""
        t, a = self.threshold, self.anchor
        if p <= t:
            return a * p / t if t > 0 else a
        return a + (1.0 - a) * (p - t) / (1.0 - t) if t < 1 else 1.0

    def score(self, text: str) -> float:
        """The calibrated score of ``text``."""
        return self.calibrate(self.probability(text))


def load_learned_pack(path: Path) -> LearnedPack:
    """Read one trained pack file (``<name>.npz``)."""
    with np.load(path) as data:
        weights = np.asarray(data["weights"], dtype=np.float32)
        if weights.shape != (DIM,):
            raise ValueError(f"{path}: weights: expected {DIM} values, got {weights.shape}")
        return LearnedPack(
            name=path.stem,
            weights=weights,
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
            anchor=float(data["anchor"]),
        )


def load_learned_packs(directory: Path = WEIGHTS_DIR) -> dict[str, LearnedPack]:
    """Every trained pack in ``directory``, by name (none when it does not exist)."""
    if not directory.is_dir():
        return {}
    return {p.stem: load_learned_pack(p) for p in sorted(directory.glob("*.npz"))}
