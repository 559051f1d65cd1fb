"""The AMD stage machine: which kind of callee the call has reached so far.

A pure state machine (no asyncio, no I/O). Each classified callee turn becomes
a :class:`Prediction`; :meth:`StageMachine.apply` decides whether it moves the
call's stage. The rules:

* The call starts ``uncertain``; from there any prediction is accepted.
* ``human`` and ``machine-unavailable`` are terminal: nothing changes them.
* ``machine-screening`` may move to ``human``, ``machine-vm`` or
  ``machine-unavailable`` (a screener never becomes an IVR menu).
* ``machine-vm`` and ``machine-ivr`` may move to each other, to ``human`` or to
  ``machine-unavailable`` (never back to screening).
* No machine stage returns to ``uncertain``.
* Leaving a machine stage needs strong evidence (``confidence >= strong``):
  a later turn may correct a machine stage, but a hesitant guess may not.
* ``wait`` (hold music, "please hold") never changes the stage.
* A prediction for a turn older than the latest seen turn is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from agent.core.messages import AmdCategory, FinalAmdCategory

__all__ = [
    "ALLOWED",
    "DEFAULT_STRONG",
    "TERMINAL",
    "Prediction",
    "StageMachine",
    "Transition",
]

#: Confidence at or above which a prediction may correct a machine stage.
DEFAULT_STRONG = 0.85

#: Stages nothing can change.
TERMINAL: frozenset[FinalAmdCategory] = frozenset({"human", "machine-unavailable"})

_ALL_FINAL: frozenset[FinalAmdCategory] = frozenset(get_args(FinalAmdCategory))

#: For each stage, the stages a prediction may move it to (itself included).
ALLOWED: dict[FinalAmdCategory, frozenset[FinalAmdCategory]] = {
    "uncertain": _ALL_FINAL,
    "machine-screening": frozenset(
        {"machine-screening", "human", "machine-vm", "machine-unavailable"}
    ),
    "machine-vm": frozenset({"machine-vm", "human", "machine-ivr", "machine-unavailable"}),
    "machine-ivr": frozenset({"machine-ivr", "human", "machine-vm", "machine-unavailable"}),
    "human": frozenset({"human"}),
    "machine-unavailable": frozenset({"machine-unavailable"}),
}

_VALID_CATEGORIES: frozenset[str] = _ALL_FINAL | {"wait"}


@dataclass(frozen=True)
class Prediction:
    """One classification of a callee turn.

    Attributes:
        turn: Index of the callee turn the prediction is about (0-based, rising).
        category: The predicted category; ``wait`` means "keep listening".
        confidence: How sure the classifier is, from 0.0 to 1.0.
        reason: Short machine-readable origin, e.g. ``"phrase:leave a message"``.
    """

    turn: int
    category: AmdCategory
    confidence: float
    reason: str = ""

    def __post_init__(self) -> None:
        if self.category not in _VALID_CATEGORIES:
            raise ValueError(f"Prediction.category: unknown AMD category {self.category!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(
                f"Prediction.confidence: expected a number from 0.0 to 1.0, got {self.confidence}"
            )
        if self.turn < 0:
            raise ValueError(f"Prediction.turn: expected a turn index >= 0, got {self.turn}")


@dataclass(frozen=True)
class Transition:
    """What one applied prediction did to the stage.

    Attributes:
        old: The stage before the prediction.
        new: The stage after it (equal to ``old`` when rejected or unchanged).
        accepted: Whether the prediction was accepted (a ``wait`` or a repeat
            of the current stage is accepted without changing anything).
        why: A short explanation, for logs and tests.
    """

    old: FinalAmdCategory
    new: FinalAmdCategory
    accepted: bool
    why: str

    @property
    def changed(self) -> bool:
        """Whether the stage moved."""
        return self.old != self.new


class StageMachine:
    """Tracks the call's AMD stage across callee turns.

    Args:
        strong: Minimum confidence for a prediction to move the call out of a
            machine stage.
    """

    def __init__(self, *, strong: float = DEFAULT_STRONG) -> None:
        if not 0.0 <= strong <= 1.0:
            raise ValueError(f"StageMachine.strong: expected 0.0 to 1.0, got {strong}")
        self.strong = strong
        self._stages: list[FinalAmdCategory] = ["uncertain"]
        self._latest_turn = -1

    @property
    def stage(self) -> FinalAmdCategory:
        """The current stage."""
        return self._stages[-1]

    @property
    def stages(self) -> tuple[FinalAmdCategory, ...]:
        """Every stage the call has been in, in order, starting with ``uncertain``.

        Repeats are collapsed and ``wait`` never appears.
        """
        return tuple(self._stages)

    @property
    def final(self) -> bool:
        """Whether the stage is terminal (``human`` or ``machine-unavailable``)."""
        return self.stage in TERMINAL

    @property
    def latest_turn(self) -> int:
        """The newest turn index seen so far (-1 before any prediction)."""
        return self._latest_turn

    def apply(self, pred: Prediction) -> Transition | None:
        """Applies one prediction.

        Args:
            pred: The prediction for a callee turn.

        Returns:
            None when the prediction is for a superseded turn (it is discarded
            and has no effect); otherwise the resulting :class:`Transition`.
        """
        if pred.turn < self._latest_turn:
            return None
        self._latest_turn = pred.turn
        old = self.stage
        new = pred.category
        if new == "wait":
            return Transition(old, old, True, "wait keeps the stage")
        if new == old:
            return Transition(old, old, True, "same stage")
        if old in TERMINAL:
            return Transition(old, old, False, f"{old} is terminal")
        if new not in ALLOWED[old]:
            return Transition(old, old, False, f"{old} cannot become {new}")
        if old != "uncertain" and pred.confidence < self.strong:
            return Transition(
                old,
                old,
                False,
                f"leaving {old} needs confidence >= {self.strong}, got {pred.confidence}",
            )
        self._stages.append(new)
        return Transition(old, new, True, f"{old} -> {new}")
