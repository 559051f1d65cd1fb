"""The call controller's suite (tests/calls/controller) and the run lifecycle, text-only.

The suite's agent answers from a reply script (``script:replies.yaml``), so these
tests check what the runtime does with markers, transfers, guardian questions and
barge-in, not a model's wording. Everything runs on the virtual clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, tts

from agent.app.config import load_config
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.session.runs import RunTracker
from tests.conftest import CALLS

SUITE = CALLS / "controller"
CONFIG = SUITE / "agent.yaml"


class RecordingTTS(EstimateTTS):
    """The estimate TTS, remembering every text it was asked to speak."""

    def __init__(self) -> None:
        super().__init__(sample_rate=16000)
        self.texts: list[str] = []

    def synthesize(self, text: str, *, conn_options: APIConnectOptions | None = None) -> Any:
        self.texts.append(text)
        if conn_options is None:
            return super().synthesize(text)
        return super().synthesize(text, conn_options=conn_options)


def _suite(
    names: list[str] | None = None, *, answer: str | None = None, speech: RecordingTTS | None = None
) -> dict[str, ReplayedCall]:
    replayer = Replayer(load_config(CONFIG), ReplayOptions(text_only=True))
    if speech is not None:
        replayer._models = dataclasses.replace(replayer.models(), tts=speech)
    if answer is not None:
        desk = replayer.desk
        desk.subscribe(lambda ev, q: desk.answer(q.id, answer) if ev == "asked" else None)
    calls = load_paths([SUITE])
    if names:
        calls = [c for c in calls if c.name in names]

    async def main() -> list[ReplayedCall]:
        return await replayer.replay_all(calls)

    return {r.result.name: r for r in clock.run(main())}


@pytest.fixture(scope="module")
def suite() -> dict[str, ReplayedCall]:
    return _suite()


def _turns(r: ReplayedCall, role: str) -> list[Any]:
    return [t for t in r.result.turns if t.role == role]


def _kinds(r: ReplayedCall, kind: str) -> list[Any]:
    return [m for m in r.messages if m.kind == kind]


def test_every_controller_call_meets_its_expectations(suite: dict[str, ReplayedCall]) -> None:
    failed = {name: r.result.failures for name, r in suite.items() if not r.result.ok}
    assert failed == {}
    assert set(suite) >= {
        "barge-in-new-question",
        "end-call-marker",
        "transfer-to-billing",
        "guardian-question-timeout",
    }


def test_markers_never_reach_transcripts_or_history(suite: dict[str, ReplayedCall]) -> None:
    for r in suite.values():
        for t in r.result.turns:
            assert "[" not in t.text and "]" not in t.text, (r.result.name, t.text)
        for m in _kinds(r, "agent_sentence") + _kinds(r, "agent_turn_completed"):
            assert "[" not in m.text, (r.result.name, m.text)


def test_markers_never_reach_the_speech() -> None:
    speech = RecordingTTS()
    results = _suite(["end-call-marker", "transfer-to-billing"], speech=speech)
    assert all(r.result.ok for r in results.values())
    spoken = " ".join(speech.texts)
    assert "Thanks for calling, goodbye." in spoken
    assert "Let me transfer you to our billing team." in spoken
    for word in ("[", "END_CALL", "TRANSFER", "billing]", "Is there anything else"):
        assert word not in spoken


def test_end_call_finishes_the_sentence_then_hangs_up(suite: dict[str, ReplayedCall]) -> None:
    r = suite["end-call-marker"]
    agent = _turns(r, "agent")
    assert agent[-1].text == "Thanks for calling, goodbye."  # the rest of the reply is dropped
    assert agent[-1].interrupted is False
    assert "Hello? Are you still there?" not in [t.text for t in _turns(r, "callee")]
    (marker,) = _kinds(r, "control_marker")
    assert marker.marker == "end_call"
    ended = _kinds(r, "call_ended")[-1]
    assert ended.reason == "agent ended the call" and ended.disposition == "completed"
    # the line closed once the goodbye had played, not before
    assert r.result.duration == pytest.approx(agent[-1].end, abs=0.1)


def test_transfer_hands_the_call_to_the_configured_target(suite: dict[str, ReplayedCall]) -> None:
    r = suite["transfer-to-billing"]
    assert r.result.disposition == "transferred"
    (done,) = _kinds(r, "call_transferred")
    assert done.target == "billing"
    agent = _turns(r, "agent")
    assert agent[-1].text == "Let me transfer you to our billing team."
    assert done.at >= _kinds(r, "agent_turn_completed")[-1].at  # after the sentence played
    assert "Hello? Did you transfer me?" not in [t.text for t in _turns(r, "callee")]


def test_a_guardian_question_holds_the_caller_then_times_out(
    suite: dict[str, ReplayedCall],
) -> None:
    r = suite["guardian-question-timeout"]
    agent = [t.text for t in _turns(r, "agent")]
    hold = agent.index("One moment please, I'm checking on that for you.")
    assert agent[hold - 1] == "Let me check that with the account holder."
    assert agent[hold + 1].startswith("I couldn't reach the account holder")
    statuses = [q.status for q in _kinds(r, "guardian_question")]
    assert statuses == ["pending", "timed_out"]
    asked, closed = _kinds(r, "guardian_question")
    assert asked.question == "May we refund last month's cleaning charge?"
    assert closed.at - asked.at == pytest.approx(20.0, abs=0.01)  # guardian.question_timeout


def test_a_guardian_answer_resumes_the_call_with_it() -> None:
    r = _suite(["guardian-question-timeout"], answer="yes")["guardian-question-timeout"]
    agent = [t.text for t in _turns(r, "agent")]
    assert "Good news: the refund is approved and will reach your account this week." in agent
    statuses = [(q.status, q.answer) for q in _kinds(r, "guardian_question")]
    assert statuses == [("pending", None), ("answered", "yes")]


def test_barge_in_interrupts_only_the_greeting_and_the_next_words_are_answered(
    suite: dict[str, ReplayedCall],
) -> None:
    r = suite["barge-in-new-question"]
    agent = _turns(r, "agent")
    assert agent[0].interrupted is True
    assert "How can I help?" not in agent[0].text  # the rest of the greeting was never said
    assert agent[1].text == "We're open nine to five, Monday to Friday."
    assert agent[1].interrupted is False
    settled = {m.run_id: m.outcome for m in _kinds(r, "turn_settled") if m.run_id}
    assert list(settled.values())[0] == "interrupted"
    assert all(o in ("completed", "interrupted") for o in settled.values())


def test_every_callee_turn_and_every_run_settles_exactly_once(
    suite: dict[str, ReplayedCall],
) -> None:
    for r in suite.values():
        settled = _kinds(r, "turn_settled")
        runs = [m.run_id for m in settled if m.run_id]
        assert len(runs) == len(set(runs))
        started = {m.run_id for m in _kinds(r, "agent_turn_completed")}
        assert started <= set(runs)
        turns = {m.turn_id for m in _kinds(r, "user_turn_completed")}
        assert turns <= {m.turn_id for m in settled}, r.result.name


# -- the run tracker -----------------------------------------------------------------


def test_a_run_settles_once_and_its_turn_with_it() -> None:
    async def main() -> None:
        runs = RunTracker()
        rec = runs.begin("speech_1", "turn_1")
        turn = runs.turn_future("turn_1")
        assert runs.current("speech_1")
        runs.settle("speech_1", "interrupted", "Hel")
        runs.settle("speech_1", "completed", "Hello")  # the first outcome wins
        assert (await rec.done).outcome == "interrupted"
        assert (await turn).run_id == "speech_1"
        assert not runs.current("speech_1")  # a cancel naming it now is stale
        runs.no_reply("turn_2")
        assert (await runs.wait_turn("turn_2")).outcome == "no_reply"

    clock.run(main())


def test_teardown_moves_the_version_before_it_aborts_so_late_work_is_dropped() -> None:
    async def main() -> None:
        runs = RunTracker()
        rec = runs.begin("speech_1", "turn_1")
        seen: list[bool] = []
        # whatever reacts to the abort (a late marker, a late say) finds itself stale
        rec.done.add_done_callback(lambda f: seen.append(runs.live(rec.version)))
        waiting = asyncio.ensure_future(runs.wait_turn("turn_1"))
        later = runs.turn_future("turn_9")
        aborted = runs.abort_all()
        await asyncio.sleep(0)
        assert [r.outcome for r in aborted] == ["aborted"]
        assert seen == [False]
        assert (await waiting).outcome == "aborted" and later.result().outcome == "aborted"
        # a run that starts during teardown settles at once
        assert runs.begin("speech_2", None).done.result().outcome == "aborted"

    clock.run(main())


def test_a_closed_session_settles_the_reply_in_flight_as_aborted(tmp_path: Path) -> None:
    from tests.fakes.models import ScriptedLLM
    from tests.unit.test_replay_calls import _inline, _replay, _replayer

    call = _inline(
        """
name: cut-short
direction: inbound
callee:
  - after: agent_turn
    gap: 0.5
    timeout: 10
    say: "Tell me everything."
max_seconds: 12
""",
        tmp_path,
    )
    slow = ScriptedLLM(["Hello there.", "Well, " + "and then " * 40 + "done."], token_delay=0.5)
    (r,) = _replay([call], _replayer(slow))
    settled = [m for m in r.messages if m.kind == "turn_settled"]
    assert settled[-1].outcome == "aborted" and settled[-1].turn_id == "turn_1"
    ended = next(m for m in r.messages if m.kind == "call_ended")
    assert settled[-1].at <= ended.at + 2.5  # within the shutdown grace
    # nothing of the aborted run comes after it
    after = r.messages[r.messages.index(settled[-1]) + 1 :]
    assert not [m for m in after if m.kind in ("agent_sentence", "control_marker", "say")]


def test_a_failing_llm_still_settles_every_turn(tmp_path: Path) -> None:
    from tests.fakes.models import ScriptedLLM
    from tests.unit.test_replay_calls import _inline, _replay, _replayer

    call = _inline(
        """
name: broken-llm
direction: inbound
callee:
  - at: 1.0
    say: "Hello?"
  - after: previous
    gap: 4.0
    say: "Anyone there?"
  - after: previous
    gap: 4.0
    hangup: true
max_seconds: 30
""",
        tmp_path,
    )
    (r,) = _replay([call], _replayer(ScriptedLLM(fail=RuntimeError("model crashed"))))
    turns = {m.turn_id for m in r.messages if m.kind == "user_turn_completed"}
    settled = {m.turn_id: m.outcome for m in r.messages if m.kind == "turn_settled"}
    assert turns and turns <= set(settled)
    runs = [m for m in r.messages if m.kind == "turn_settled" and m.run_id]
    assert runs and all(m.outcome in ("failed", "completed", "interrupted") for m in runs)


def test_recording_tts_is_a_tts() -> None:
    assert isinstance(RecordingTTS(), tts.TTS)
