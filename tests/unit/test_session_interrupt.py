"""Barge-in scoped to its run: a stale InterruptRun never cuts a newer reply."""

from __future__ import annotations

from typing import Any

import pytest

from agent.core.messages import AgentSpeechStarted, InterruptRun
from agent.session.actor import SessionActor
from tests.unit.test_replay_calls import _call, _replay


def test_interrupt_run_only_hits_the_run_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[str] = []
    original_init = SessionActor.__init__

    def init(self: SessionActor, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)

        def on_start(msg: AgentSpeechStarted) -> None:
            starts.append(msg.run_id)
            if len(starts) == 2:  # the first reply is over: naming it must not cut this one
                self.tell_nowait(InterruptRun(call_id=self.call_id, run_id=starts[0]))
            if len(starts) == 3:  # naming the reply in flight interrupts it
                self.tell_nowait(InterruptRun(call_id=self.call_id, run_id=starts[2]))

        self.bus.subscribe("agent_speech_started", on_start)

    monkeypatch.setattr(SessionActor, "__init__", init)
    (r,) = _replay([_call("human-conversation-hangup")])
    agent = [t for t in r.result.turns if t.role == "agent"]
    assert len(starts) >= 3 and len(set(starts)) == len(starts)
    assert agent[1].interrupted is False
    assert agent[2].interrupted is True
    assert agent[2].end - agent[2].start < 0.2


def test_opening_is_not_cut_by_the_commit_of_the_words_amd_already_decided_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A slow recogniser: AMD's "Hello?" rule decides before the final transcript.

    livekit commits that transcript's turn after the opening has started; the
    opening must play on, and the callee's words must be recorded exactly once.
    """
    import asyncio

    from agent.telephony.sim.io import TranscriptFeedSTT
    from tests.unit.test_replay_calls import _inline

    original = TranscriptFeedSTT.final_transcript

    def late_final(self: TranscriptFeedSTT, text: str) -> None:
        asyncio.get_running_loop().call_later(0.8, original, self, text)

    monkeypatch.setattr(TranscriptFeedSTT, "final_transcript", late_final)
    call = _inline(
        """
name: slow-recogniser
callee:
  - at: 0.5
    say: "Hello?"
  - after: agent_turn
    gap: 0.5
    timeout: 15
    hangup: true
max_seconds: 30
""",
        tmp_path,
    )
    (r,) = _replay([call])
    res = r.result
    callee = [t for t in res.turns if t.role == "callee"]
    agent = [t for t in res.turns if t.role == "agent"]
    assert [t.text for t in callee] == ["Hello?"]
    assert agent and agent[0].interrupted is False
    # decided on timing 0.3 s (amd.human_silence) after "Hello?" ended, and the
    # opening started right away
    assert res.amd is not None and res.amd.category == "human"
    hello_end = 0.5 + 0.065 * len("Hello?")
    assert agent[0].start == pytest.approx(hello_end + 0.3, abs=0.15)


def test_a_reply_ready_while_the_callee_talks_on_waits_and_is_dropped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The opening is ready only after the callee has begun to talk again.

    AMD decides on "Hello?" and its silence; the opening's audio takes 0.4 s to
    synthesise, and the callee goes on 0.1 s before it is ready. Its first audio
    waits for the callee to pause; as the callee talks on past the interruption
    threshold, livekit interrupts it unheard, and the agent answers the callee's
    whole utterance once it is over: nothing starts while the callee is talking.
    """
    import asyncio

    from agent.models.estimate_tts import EstimateChunkedStream
    from tests.unit.test_replay_calls import _inline

    original = EstimateChunkedStream._run

    async def slow_first_audio(self: EstimateChunkedStream, output_emitter: Any) -> None:
        await asyncio.sleep(0.4)
        await original(self, output_emitter)

    monkeypatch.setattr(EstimateChunkedStream, "_run", slow_first_audio)
    hello_end = 0.5 + 0.065 * len("Hello?")
    call = _inline(
        f"""
name: talks-on
callee:
  - at: 0.5
    say: "Hello?"
  - at: {hello_end + 0.8:.3f}
    say: "Sorry, I was just walking in the door with the shopping, who is this please?"
  - after: agent_turn
    gap: 0.5
    timeout: 15
    hangup: true
max_seconds: 40
""",
        tmp_path,
    )
    (r,) = _replay([call])
    assert r.result.amd is not None and r.result.amd.category == "human"
    second = [(start, end) for payload, start, end in r.played if payload == "say"][1]
    heard = [t for t in r.result.turns if t.role == "agent" and t.end > t.start]
    assert heard, r.result.turns
    # no agent audio inside the callee's second utterance
    assert all(not (second[0] <= t.start < second[1]) for t in heard), (second, heard)
    assert r.cut_ins == 0


def test_a_said_text_has_its_first_clause_synthesised_on_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The voicemail message comes whole; its first audio waits only for its first clause."""
    from agent.models.estimate_tts import EstimateTTS

    asked: list[str] = []
    original = EstimateTTS.synthesize

    def recording(self: EstimateTTS, text: str, **kw: Any) -> Any:
        asked.append(text)
        return original(self, text, **kw)

    monkeypatch.setattr(EstimateTTS, "synthesize", recording)
    (r,) = _replay([_call("vm-personal-beep")])
    assert r.result.voicemail_left
    message = next(t.text for t in r.result.turns if t.role == "agent")
    # the first synthesis is a clause of the message, and the message is whole
    assert asked and message.startswith(asked[0].strip()) and len(asked[0]) < len(message)
    assert asked[0].rstrip().endswith(","), asked
