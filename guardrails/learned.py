"""A small learned text classifier per pack: hashed n-grams and a logistic regression.

Features are the character 3- to 5-grams and the word 1- and 2-grams of the text
after :func:`guardrails.normalize.deobfuscate` and lowercasing, hashed (CRC-32, so
the same on every run and machine) into ``DIM`` buckets, present or absent, the
vector scaled to unit length. A pack's model is one weight per bucket and a bias;
its probability is the logistic of their dot product. Scoring a sentence takes a
fraction of a millisecond on one core (numpy only).

A pack may also carry a probe: a logistic regression on the text's sentence
embedding (:mod:`guardrails.encoder`, 256 dimensions, a few hundredths of a
millisecond). The pack's probability is then the mean of the n-gram model's and the
probe's: the n-grams know spellings, the embedding what the words mean.

A trained pack is a ``.npz`` file in ``guardrails/weights/`` (written by
``python -m guardrails.training``): ``weights`` (float16, ``DIM``), ``bias``,
``threshold`` (the probability chosen on the validation split) and ``anchor`` (the
score that threshold is mapped onto, the pack's usual decision threshold), and for a
pack with a probe ``probe_weights`` (float32, ``encoder.DIM``) and ``probe_bias``. The
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

__all__ = ["DIM", "WEIGHTS_DIR", "LearnedPack", "LinearProbe", "features", "load_learned_packs"]

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


def _logistic(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0))))


@dataclass(frozen=True)
class LinearProbe:
    """A logistic regression on a text's sentence embedding.

    Attributes:
        weights: One weight per embedding dimension.
        bias: The intercept.
    """

    weights: npt.NDArray[np.float32]
    bias: float

    def probability(self, text: str) -> float:
        """The probe's probability that ``text`` belongs to the pack."""
        from .encoder import load_encoder  # noqa: PLC0415  (loaded once, when first needed)

        x = load_encoder().embed([text])[0]
        return _logistic(float(x @ self.weights) + self.bias)


@dataclass(frozen=True)
class LearnedPack:
    """One pack's trained classifier.

    Attributes:
        name: The decision name it answers.
        weights: One weight per hash bucket.
        bias: The intercept.
        threshold: The probability chosen on the validation split.
        anchor: The calibrated score ``threshold`` maps onto.
        probe: The embedding probe averaged with the n-grams, if the pack has one.
    """

    name: str
    weights: npt.NDArray[np.float32]
    bias: float
    threshold: float
    anchor: float
    probe: LinearProbe | None = None

    def ngram_probability(self, text: str) -> float:
        """The n-gram model's probability that ``text`` belongs to the pack."""
        idx = features(text)
        if idx.size == 0:
            z = self.bias
        else:
            z = float(self.weights[idx].sum()) / float(np.sqrt(idx.size)) + self.bias
        return _logistic(z)

    def probability(self, text: str) -> float:
        """The classifier's raw probability: the n-grams', or their mean with the probe's."""
        p = self.ngram_probability(text)
        if self.probe is None:
            return p
        return (p + self.probe.probability(text)) / 2

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
        probe = None
        if "probe_weights" in data.files:
            from .encoder import DIM as EMBEDDING_DIM  # noqa: PLC0415

            pw = np.asarray(data["probe_weights"], dtype=np.float32)
            if pw.shape != (EMBEDDING_DIM,):
                raise ValueError(
                    f"{path}: probe_weights: expected {EMBEDDING_DIM} values, got {pw.shape}"
                )
            probe = LinearProbe(pw, float(data["probe_bias"]))
            from .encoder import load_encoder  # noqa: PLC0415

            load_encoder()  # with the weights, not on the first caller turn
        return LearnedPack(
            name=path.stem,
            weights=weights,
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
            anchor=float(data["anchor"]),
            probe=probe,
        )


def load_learned_packs(directory: Path = WEIGHTS_DIR) -> dict[str, LearnedPack]:
    """Every trained pack in ``directory``, by name (none when it does not exist)."""
    if not directory.is_dir():
        return {}
    return {p.stem: load_learned_pack(p) for p in sorted(directory.glob("*.npz"))}
