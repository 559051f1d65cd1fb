"""Recorded calls replayed text-only through the real actors, with scripted models.

Everything runs on the virtual clock: the timings asserted here are replay
times, not wall-clock speed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.app.call import ModelSet
from agent.app.config import AgentConfig
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from agent.telephony.sim.recorded_call import RecordedCall
from tests.conftest import CALLS, DEMO
from tests.fakes.models import ScriptedLLM


def _replayer(llm: ScriptedLLM | None = None, **config: Any) -> Replayer:
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=llm or ScriptedLLM(),
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    return Replayer(AgentConfig(**config), ReplayOptions(text_only=True), models=models)


def _replay(
    calls: list[RecordedCall], replayer: Replayer | None = None, **kw: Any
) -> list[ReplayedCall]:
    replayer = replayer or _replayer()

    async def main() -> list[ReplayedCall]:
        out = await replayer.replay_all(calls)
        # nothing of ours may outlive the calls
        await asyncio.sleep(0)
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == [], [t.get_name() for t in leftover]
        return out

    return clock.run(main(), **kw)


def _call(name: str) -> RecordedCall:
    return load_paths([CALLS / f"{name}.call.yaml"])[0]


def _inline(yaml_text: str, tmp_path: Any) -> RecordedCall:
    path = tmp_path / "inline.call.yaml"
    path.write_text(yaml_text)
    return load_paths([path])[0]


def test_every_recorded_call_meets_its_expectations_and_leaves_no_task() -> None:
    calls = load_paths([CALLS, DEMO])
    results = _replay(calls)
    failed = {r.result.name: r.result.failures for r in results if not r.result.ok}
    assert failed == {}
    assert len(results) == len(calls) >= 14


def test_outbound_agent_answers_the_first_words_after_the_endpointing_delay() -> None:
    (r,) = _replay([_call("human-conversation-hangup")])
    res = r.result
    assert res.disposition == "completed"
    first_callee, first_agent = res.turns[0], res.turns[1]
    assert first_callee.role == "callee" and first_callee.text == "Hello?"
    assert first_agent.role == "agent"
    assert "Acme Dental" in first_agent.text
    # AMD's "Hello?" rule decides after human_silence (0.3 s) and the controller opens at
    # once; the scripted LLM and estimate TTS take no replay time
    assert first_agent.start == pytest.approx(first_callee.end + 0.3, abs=0.1)
    assert res.agent_first_audio_at == first_agent.start
    roles = [t.role for t in res.turns]
    assert roles.count("agent") >= 3 and roles.count("callee") >= 3


def test_agent_turn_length_follows_the_estimated_speech_duration() -> None:
    (r,) = _replay([_call("human-conversation-hangup")])
    agent = [t for t in r.result.turns if t.role == "agent" and not t.interrupted][0]
    assert agent.end - agent.start == pytest.approx(0.065 * len(agent.text), abs=0.15)


def test_inbound_agent_greets_first() -> None:
    (r,) = _replay([_call("inbound-billing-question")])
    assert r.result.turns[0].role == "agent"
    assert r.result.turns[0].start < 0.5


def test_barge_in_interrupts_only_the_agent_turn_in_flight() -> None:
    long = "This is a long explanation of our appointment policy. " * 4
    (r,) = _replay([_call("barge-in-interrupts-agent")], _replayer(ScriptedLLM([long])))
    agent = [t for t in r.result.turns if t.role == "agent"]
    interrupted = [t for t in agent if t.interrupted]
    assert len(interrupted) >= 1
    cut = interrupted[0]
    # the callee spoke 0.8 s after the agent started: the agent stopped soon after
    assert cut.end - cut.start < 0.065 * len(long)
    callee_after = [t for t in r.result.turns if t.role == "callee" and t.start > cut.start]
    assert callee_after and callee_after[0].start == pytest.approx(cut.start + 0.8, abs=0.1)


SILENT_CALLEE = """
name: silent-callee
answer: {status: answered, after: 1.0}
callee:
  - at: 12.0
    hangup: true
max_seconds: 30
"""


def test_without_amd_a_silent_callee_gets_an_opening_after_two_seconds(tmp_path: Any) -> None:
    call = _inline(SILENT_CALLEE, tmp_path)
    (r,) = _replay([call], _replayer(amd={"enabled": False}))
    agent = [t for t in r.result.turns if t.role == "agent"]
    assert agent and agent[0].start == pytest.approx(2.0, abs=0.1)
    assert r.result.disposition == "completed"
    assert r.result.duration == pytest.approx(12.0, abs=0.1)


def test_with_amd_a_silent_callee_is_uncertain_then_greeted_as_a_person(tmp_path: Any) -> None:
    call = _inline(SILENT_CALLEE, tmp_path)
    (r,) = _replay([call])
    agent = [t for t in r.result.turns if t.role == "agent"]
    # the no-speech timeout (10 s) settles AMD; the default is to proceed as human
    assert agent and agent[0].start == pytest.approx(10.0, abs=0.1)
    assert r.result.amd is not None and r.result.amd.category == "uncertain"
    assert r.result.amd.decided_at == pytest.approx(10.0, abs=0.1)


def test_uncertain_can_hang_up_instead(tmp_path: Any) -> None:
    call = _inline(SILENT_CALLEE, tmp_path)
    (r,) = _replay([call], _replayer(amd={"uncertain_action": "hangup"}))
    assert [t for t in r.result.turns if t.role == "agent"] == []
    assert r.result.duration == pytest.approx(10.0, abs=0.1)


def test_replay_time_bound_ends_a_call_that_never_hangs_up(tmp_path: Any) -> None:
    call = _inline(
        """
name: never-hangs-up
callee:
  - at: 0.5
    say: "Hello?"
max_seconds: 8
""",
        tmp_path,
    )
    (r,) = _replay([call])
    assert r.result.disposition == "completed"
    assert r.result.duration == pytest.approx(8.0, abs=0.2)


def test_unanswered_calls_have_no_amd_and_take_no_time() -> None:
    names = ["outbound-busy", "outbound-no-answer", "outbound-failed", "outbound-rejected"]
    results = _replay([_call(n) for n in names])
    assert [r.result.disposition for r in results] == ["busy", "no-answer", "failed", "rejected"]
    assert all(r.result.amd is None and r.result.duration == 0 for r in results)


def test_dtmf_trigger_times_out_when_the_agent_sends_no_keys() -> None:
    # a goal no option matches: the agent keeps listening and the menu moves on by itself
    call = _call("ivr-pharmacy-digits").model_copy(update={"agent": {"ivr_goal": "parking"}})
    (r,) = _replay([call])
    assert r.result.dtmf_sent == ""
    assert r.result.amd is not None and r.result.amd.stages == ["machine-ivr", "human"]


def test_results_do_not_depend_on_speed() -> None:
    call = _call("human-conversation-hangup")
    (fast,) = _replay([call], speed=None)
    (paced,) = _replay([call], speed=200.0)
    assert [(t.role, t.text) for t in fast.result.turns] == [
        (t.role, t.text) for t in paced.result.turns
    ]
    # livekit's endpointing reads the wall clock (docs/decisions.md): allow its jitter
    for a, b in zip(fast.result.turns, paced.result.turns, strict=True):
        assert a.start == pytest.approx(b.start, abs=0.02)
        assert a.end == pytest.approx(b.end, abs=0.02)
    assert fast.result.duration == pytest.approx(paced.result.duration, abs=0.02)


def test_a_crashing_actor_ends_the_call_with_error_and_nothing_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from amd.actor import AmdActor

    async def crash(self: AmdActor, msg: Any) -> None:
        raise RuntimeError("detector exploded")

    monkeypatch.setattr(AmdActor, "receive", crash)
    (r,) = _replay([_call("human-conversation-hangup")])
    assert r.result.disposition == "error"
    assert r.result.duration < 30


def test_a_model_that_keeps_failing_ends_the_call_with_error() -> None:
    llm = ScriptedLLM(fail=RuntimeError("model unavailable"))
    (r,) = _replay([_call("human-conversation-hangup")], _replayer(llm))
    # livekit gives up on the LLM and closes the session; the controller ends the call
    assert r.result.disposition == "error"
    assert r.result.duration < 30
    assert [t for t in r.result.turns if t.role == "agent"] == []


def test_the_agent_ends_the_call_after_its_goodbye(tmp_path: Any) -> None:
    call = _inline(
        """
name: agent-says-goodbye
callee:
  - at: 0.5
    say: "Hello?"
  - after: agent_turn
    gap: 0.5
    timeout: 10
    say: "No thanks, I'm all set."
  - after: agent_turn
    gap: 30.0
    timeout: 40
    hangup: true
max_seconds: 60
""",
        tmp_path,
    )
    llm = ScriptedLLM(
        ["Hi, this is Sam from Acme Dental. Is now a good time?", "Understood. Goodbye!", "Bye."],
        tool_calls={2: "end_call"},
    )
    (r,) = _replay([call], _replayer(llm))
    res = r.result
    assert res.disposition == "completed"
    goodbye = [t for t in res.turns if t.role == "agent" and "Goodbye" in t.text]
    assert goodbye and goodbye[0].interrupted is False
    # the agent hung up right after its goodbye, long before the callee would have
    assert res.duration < 25
    assert res.duration >= goodbye[0].end
