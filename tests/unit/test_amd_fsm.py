"""The AMD stage machine: allowed moves, terminal stages, wait, stale turns, strong evidence."""

from __future__ import annotations

from typing import get_args

import pytest

from agent.core.messages import FinalAmdCategory
from amd.fsm import ALLOWED, StageMachine
from amd.fsm import Prediction as P

FINAL: tuple[FinalAmdCategory, ...] = get_args(FinalAmdCategory)
MACHINE_STAGES = ("machine-screening", "machine-vm", "machine-ivr")
EXPECTED_ALLOWED = {
    "machine-screening": {"machine-screening", "human", "machine-vm", "machine-unavailable"},
    "machine-vm": {"machine-vm", "human", "machine-ivr", "machine-unavailable"},
    "machine-ivr": {"machine-ivr", "human", "machine-vm", "machine-unavailable"},
}


def _in(stage: FinalAmdCategory, strong: float = 0.85) -> StageMachine:
    fsm = StageMachine(strong=strong)
    if stage != "uncertain":
        fsm.apply(P(0, stage, 0.5, "setup"))
    assert fsm.stage == stage
    return fsm


def test_starts_uncertain_and_not_final() -> None:
    fsm = StageMachine()
    assert fsm.stage == "uncertain"
    assert fsm.stages == ("uncertain",)
    assert not fsm.final


@pytest.mark.parametrize("target", FINAL)
def test_uncertain_accepts_anything_even_weak(target: FinalAmdCategory) -> None:
    fsm = StageMachine()
    t = fsm.apply(P(0, target, 0.1, "weak"))
    assert t is not None and t.accepted and t.new == target
    assert fsm.stage == target


@pytest.mark.parametrize("old", MACHINE_STAGES)
@pytest.mark.parametrize("new", FINAL)
def test_machine_stage_moves_only_where_allowed_with_strong_evidence(
    old: FinalAmdCategory, new: FinalAmdCategory
) -> None:
    fsm = _in(old)
    t = fsm.apply(P(1, new, 0.95, "strong"))
    assert t is not None
    allowed = new in EXPECTED_ALLOWED[old]
    assert t.accepted is allowed
    assert fsm.stage == (new if allowed else old)
    assert ALLOWED[old] == EXPECTED_ALLOWED[old]


@pytest.mark.parametrize("old", MACHINE_STAGES)
@pytest.mark.parametrize("new", ["human", "machine-vm", "machine-ivr", "machine-unavailable"])
def test_weak_evidence_cannot_correct_a_machine_stage(
    old: FinalAmdCategory, new: FinalAmdCategory
) -> None:
    fsm = _in(old)
    t = fsm.apply(P(1, new, 0.84, "weak"))
    assert t is not None
    if new == old:
        assert t.accepted and not t.changed
    else:
        assert not t.accepted
        assert ("confidence" in t.why) is (new in EXPECTED_ALLOWED[old])
    assert fsm.stage == old


def test_strong_threshold_is_configurable_and_inclusive() -> None:
    fsm = _in("machine-vm", strong=0.5)
    assert fsm.apply(P(1, "human", 0.5, "")).accepted  # type: ignore[union-attr]
    assert fsm.stage == "human"


@pytest.mark.parametrize("terminal", ["human", "machine-unavailable"])
@pytest.mark.parametrize("new", FINAL)
def test_terminal_stages_never_change(terminal: FinalAmdCategory, new: FinalAmdCategory) -> None:
    fsm = _in(terminal)
    assert fsm.final
    t = fsm.apply(P(1, new, 1.0, "certain"))
    assert t is not None and t.new == terminal
    assert t.accepted is (new == terminal)
    assert fsm.stage == terminal and fsm.final


@pytest.mark.parametrize("stage", FINAL)
def test_wait_keeps_every_stage(stage: FinalAmdCategory) -> None:
    fsm = _in(stage)
    before = fsm.stages
    t = fsm.apply(P(1, "wait", 1.0, "please hold"))
    assert t is not None and t.accepted and not t.changed
    assert fsm.stage == stage and fsm.stages == before


def test_superseded_turn_is_discarded() -> None:
    fsm = StageMachine()
    fsm.apply(P(2, "machine-screening", 0.9, "turn 2"))
    assert fsm.apply(P(1, "human", 1.0, "late result for turn 1")) is None
    assert fsm.stage == "machine-screening"
    assert fsm.latest_turn == 2
    # The same turn may still be re-predicted (e.g. a better model result).
    t = fsm.apply(P(2, "machine-vm", 0.9, "turn 2 again"))
    assert t is not None and t.accepted


def test_screener_to_voicemail_to_ivr_history_collapses_without_wait() -> None:
    fsm = StageMachine()
    for turn, cat in enumerate(
        ["wait", "machine-screening", "machine-screening", "wait", "machine-vm", "machine-ivr"]
    ):
        fsm.apply(P(turn, cat, 0.9, ""))  # type: ignore[arg-type]
    assert fsm.stages == ("uncertain", "machine-screening", "machine-vm", "machine-ivr")
    assert not fsm.final
    fsm.apply(P(9, "human", 0.99, "a person took over"))
    assert fsm.final and fsm.stages[-1] == "human"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"turn": 0, "category": "robot", "confidence": 0.5},
        {"turn": 0, "category": "human", "confidence": 1.5},
        {"turn": -1, "category": "human", "confidence": 0.5},
    ],
)
def test_invalid_predictions_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        P(**kwargs)  # type: ignore[arg-type]
