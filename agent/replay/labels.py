"""Placing the text labels of one timeline lane so that none overlaps another or the edge.

Pure layout: a label wants to start at its mark; it gets the room up to the next
label's start (and the page's right edge), is cut to fit with an ellipsis, moves
left to end at the edge when its mark is too close to it, and is left out (its
mark keeps the tooltip) when not even a few characters fit. Widths are estimated
from the characters, generously, because the page cannot measure text before it
is drawn; the headless-browser test checks the real boxes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Label", "Placed", "place_labels", "text_width"]

#: the gap kept between two labels, px
GAP = 4.0
#: characters cut labels keep at least (shorter ones are left out)
MIN_CHARS = 3
ELLIPSIS = "\u2026"

# widths in em of a wide sans-serif (DejaVu Sans, the usual Linux fallback), rounded up
_NARROW = set("il.,:;|!'`ijfrt()[] ")
_WIDE = set("mwMW@%&")


def text_width(text: str, size: float) -> float:
    """An upper estimate of ``text``'s width in px at font ``size`` px."""
    em = 0.0
    for char in text:
        if char in _NARROW:
            em += 0.42
        elif char in _WIDE:
            em += 1.0
        elif char.isupper() or char.isdigit():
            em += 0.75
        else:
            em += 0.64
    return em * size


@dataclass(frozen=True)
class Label:
    """A label that wants to start at ``x`` (its mark)."""

    x: float
    text: str
    size: float = 10.0


@dataclass(frozen=True)
class Placed:
    """Where a label is drawn and what it says (``text`` empty: left out)."""

    x: float
    text: str
    width: float


def _cut(text: str, room: float, size: float) -> str:
    if text_width(text, size) <= room:
        return text
    keep = len(text)
    while keep >= MIN_CHARS and text_width(text[:keep].rstrip() + ELLIPSIS, size) > room:
        keep -= 1
    return text[:keep].rstrip() + ELLIPSIS if keep >= MIN_CHARS else ""


def place_labels(labels: list[Label], right: float) -> list[Placed]:
    """Lay out one lane's labels (any order); returns one :class:`Placed` per label, in order.

    Args:
        labels: The lane's labels.
        right: The rightmost px a label may reach.
    """
    order = sorted(range(len(labels)), key=lambda i: labels[i].x)
    placed: dict[int, Placed] = {}
    end = float("-inf")  # where the last drawn label ends
    for rank, i in enumerate(order):
        label = labels[i]
        following = [labels[j].x for j in order[rank + 1 :] if labels[j].text]
        limit = min(following[0] - GAP if following else right, right)
        start = max(label.x, end + GAP)
        width = text_width(label.text, label.size)
        text = label.text
        if not text:
            placed[i] = Placed(label.x, "", 0.0)
            continue
        if start + width > limit:
            if limit == right and right - width >= end + GAP:
                start = right - width  # near the right edge: end there instead
            else:
                text = _cut(text, limit - start, label.size)
                width = text_width(text, label.size)
        if not text:
            placed[i] = Placed(label.x, "", 0.0)
            continue
        placed[i] = Placed(start, text, width)
        end = start + width
    return [placed[i] for i in range(len(labels))]
