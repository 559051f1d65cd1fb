"""Word error rate for the tests that transcribe real speech."""

from __future__ import annotations

import re


def words(text: str) -> list[str]:
    """Lowercased words, punctuation dropped (apostrophes kept)."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance divided by the reference's length."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)] / max(1, len(ref))
