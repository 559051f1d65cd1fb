"""How long after a callee line AMD decided: the replay's measure of person latency."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agent.replay.runner import _amd_delay, _amd_delay_from_voice


def _call(played: list[tuple[str, float, float]], voice_ends: list[float], decided: float) -> Any:
    sim = SimpleNamespace(answered_at=10.0, played=played, voice_ends=voice_ends)
    observed = SimpleNamespace(amd=SimpleNamespace(decided_at=decided))
    return sim, observed


def test_a_decision_after_the_line_counts_from_its_end() -> None:
    # "Hello?" said 10.5-11.1 (voice to 10.8), decided 1.4 s after the answer
    sim, observed = _call([("say", 10.5, 11.1)], [10.8], 1.4)
    assert _amd_delay(sim, observed) == pytest.approx(0.3)
    assert _amd_delay_from_voice(sim, observed) == pytest.approx(0.6)


def test_a_decision_in_the_quiet_a_line_ends_with_counts_as_zero() -> None:
    # the voice ended at 10.8, the line's audio (synthesiser quiet) at 11.1, decided at 11.0:
    # the decision followed this line, 0 s after it, not "no line" or the line before
    sim, observed = _call([("say", 10.5, 11.1)], [10.8], 1.0)
    assert _amd_delay(sim, observed) == 0.0
    assert _amd_delay_from_voice(sim, observed) == pytest.approx(0.2)

    sim, observed = _call(
        [("say", 10.5, 11.1), ("tone", 12.0, 13.0), ("say", 15.0, 16.4)], [10.8, 16.0], 6.2
    )
    assert _amd_delay(sim, observed) == 0.0
    assert _amd_delay_from_voice(sim, observed) == pytest.approx(0.2)


def test_a_decision_while_a_line_is_spoken_follows_the_line_before() -> None:
    sim, observed = _call([("say", 10.5, 11.1), ("say", 12.0, 14.0)], [10.8, 13.7], 2.5)
    assert _amd_delay(sim, observed) == pytest.approx(1.4)
    assert _amd_delay_from_voice(sim, observed) == pytest.approx(1.7)


def test_no_decision_or_no_line_before_it_has_no_delay() -> None:
    sim, observed = _call([("say", 10.5, 11.1)], [10.8], 0.5)
    assert _amd_delay(sim, observed) is None
    assert _amd_delay_from_voice(sim, observed) is None
    sim, observed = _call([("say", 10.5, 11.1)], [10.8], 1.4)
    observed.amd.decided_at = None
    assert _amd_delay(sim, observed) is None
