"""The latency budget: each answered turn's milestones, and the gate over the replays."""

from __future__ import annotations

from typing import Any

import pytest

from agent.core.messages import TurnLatency
from agent.replay.loader import load_paths
from agent.session.latency import LatencyRecorder
from tests.conftest import CALLS, DEMO
from tests.latency_checks import answered_callee_turns, check_breakdown
from tests.unit.test_replay_calls import _replay


def _recorder(audio_end: float | None = None) -> tuple[LatencyRecorder, list[Any]]:
    out: list[Any] = []
    rec = LatencyRecorder(
        call_id="call_1",
        publish=out.append,
        audio_end=(lambda before: audio_end) if audio_end is not None else None,
    )
    return rec, out


def _reply(rec: LatencyRecorder, run: str, start: float) -> None:
    for i, name in enumerate(
        ["llm_request", "llm_first_token", "first_sentence", "tts_first_audio", "first_audio"]
    ):
        rec.mark(run, name, start + 0.1 * i)


def test_an_answered_turn_is_published_once_with_its_milestones() -> None:
    rec, out = _recorder(audio_end=9.7)
    rec.speech_started(8.0)
    rec.vad_end(10.0)
    rec.stt_final(10.2)
    rec.committed("turn_1", 10.5)
    rec.bind("run_1", "turn_1")
    _reply(rec, "run_1", 10.5)
    msg = rec.finish("run_1")
    assert isinstance(msg, TurnLatency) and out == [msg]
    assert (msg.audio_end, msg.vad_end, msg.stt_final, msg.committed) == (9.7, 10.0, 10.2, 10.5)
    assert msg.first_audio == pytest.approx(10.9)
    assert msg.total() == pytest.approx(1.2)
    assert rec.finish("run_1") is None and len(out) == 1


def test_the_latest_vad_end_and_final_before_the_commit_count() -> None:
    rec, out = _recorder()
    rec.vad_end(1.0)
    rec.stt_final(1.1)
    rec.vad_end(2.0)  # the callee paused, then went on
    rec.stt_final(2.2)
    rec.committed("turn_1", 2.5)
    rec.bind("run_1", "turn_1")
    _reply(rec, "run_1", 2.5)
    msg = rec.finish("run_1")
    assert msg is not None and (msg.vad_end, msg.stt_final) == (2.0, 2.2)


def test_a_preemptive_reply_bound_after_its_work_began() -> None:
    rec, _ = _recorder()
    rec.vad_end(1.0)
    rec.stt_final(1.1)
    _reply(rec, "run_p", 1.15)  # LLM and TTS started before the commit
    rec.committed("turn_1", 1.5)
    rec.bind("run_p", "turn_1", preemptive=True)
    msg = rec.finish("run_p")
    assert msg is not None and msg.preemptive
    assert msg.llm_request is not None and msg.committed is not None
    assert msg.llm_request < msg.committed
    stages = msg.stages()
    assert stages["llm_request"] == 0.0 and stages["endpointing"] == pytest.approx(0.4)
    assert sum(stages.values()) == pytest.approx(msg.total())


def test_a_discarded_or_silent_run_publishes_nothing() -> None:
    rec, out = _recorder()
    rec.committed("turn_1", 1.0)
    rec.mark("run_x", "llm_request", 0.9)
    rec.discard("run_x")
    assert rec.finish("run_x") is None
    rec.bind("run_1", "turn_1")
    rec.mark("run_1", "llm_request", 1.0)  # interrupted before a sound
    assert rec.finish("run_1") is None
    assert out == []


def test_an_unbound_reply_answers_the_latest_turn_once() -> None:
    rec, out = _recorder()
    rec.speech_started(0.5)
    rec.committed("turn_1", 1.0)
    rec.speech_started(2.0)
    rec.committed("turn_2", 3.0)
    _reply(rec, "run_c", 3.2)  # the controller's reply: nobody bound it
    msg = rec.finish("run_c")
    assert msg is not None and msg.turn_id == "turn_2"
    _reply(rec, "run_d", 5.0)  # a second reply answers nothing new
    assert rec.finish("run_d") is None
    assert len(out) == 1


def test_a_reply_before_the_callee_spoke_answers_nothing() -> None:
    rec, out = _recorder()
    _reply(rec, "run_greet", 1.0)  # greeting after silence
    rec.speech_started(3.0)
    rec.committed("turn_1", 4.0)
    assert rec.finish("run_greet") is None
    assert out == []


def test_a_milestone_after_the_first_audio_is_not_charged() -> None:
    msg = TurnLatency(
        call_id="c",
        turn_id="turn_1",
        run_id="run_1",
        audio_end=1.0,
        vad_end=1.3,
        stt_final=2.0,  # arrived while the controller's reply already played
        committed=2.1,
        first_audio=1.6,
    )
    assert msg.stages()["stt"] == 0.0
    assert sum(msg.stages().values()) == pytest.approx(msg.total()) == pytest.approx(0.6)


@pytest.mark.parametrize("suite", [DEMO, CALLS], ids=["demo", "calls"])
def test_every_answered_turn_in_the_replays_has_a_complete_ordered_breakdown(suite: Any) -> None:
    calls = load_paths([suite])
    results = _replay(calls)
    answered = 0
    for replayed in results:
        for turn in answered_callee_turns(replayed.result):
            check_breakdown(turn, audio=False)
            answered += 1
    assert answered >= 8
