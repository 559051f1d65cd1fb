"""Fault injection into real replays: each fault, where it is injected, and the outcome.

The table lives in docs/faults.md. Each replay runs the real actors text-only on
the virtual clock, and ``_replay`` asserts that no task of the call is left
running. What is asserted: the disposition, that the call ended within its
bound, and whether the result is ``ok``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import llm, utils

from agent.app.call import ModelSet
from agent.app.config import AgentConfig
from agent.models.estimate_tts import EstimateTTS
from agent.replay.observer import CallObserver
from agent.replay.runner import Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from tests.fakes.models import ScriptedDecisionModel, ScriptedLLM, _ScriptedStream
from tests.unit.test_replay_calls import _call, _inline, _replay

INBOUND = """
name: fault
direction: inbound
callee:
  - at: 1.0
    say: "Hello, I have a question about my bill."
  - after: previous
    gap: 6.0
    say: "Are you still there?"
  - after: previous
    gap: 6.0
    hangup: true
max_seconds: 60
"""


class _MidStreamFailure(_ScriptedStream):
    async def _run(self) -> None:
        rid = utils.shortuuid("fault_")
        self._event_ch.send_nowait(
            llm.ChatChunk(id=rid, delta=llm.ChoiceDelta(role="assistant", content="Sure, your"))
        )
        await asyncio.sleep(0.2)
        raise RuntimeError("model crashed mid-stream")


class _SilentStream(_ScriptedStream):
    async def _run(self) -> None:
        await asyncio.Event().wait()  # never a first token


class FaultyLLM(ScriptedLLM):
    """A scripted LLM whose streams fail mid-stream or hang before the first token."""

    def __init__(self, stream: type[_ScriptedStream]) -> None:
        super().__init__()
        self._stream = stream

    def chat(self, *, chat_ctx: llm.ChatContext, **kw: Any) -> llm.LLMStream:
        self.requests.append(chat_ctx.copy())
        return self._stream(
            self,
            chat_ctx=chat_ctx,
            tools=kw.get("tools") or [],
            conn_options=kw.get("conn_options") or llm.llm.DEFAULT_API_CONNECT_OPTIONS,
        )


def _models(model: llm.LLM, **kw: Any) -> ModelSet:
    return ModelSet(
        stt=TranscriptFeedSTT(),
        llm=model,
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
        **kw,
    )


def _replayer(models: ModelSet) -> Replayer:
    return Replayer(AgentConfig(), ReplayOptions(text_only=True), models=models)


@pytest.mark.parametrize(
    "stream", [_MidStreamFailure, _SilentStream], ids=["llm-raises-mid-stream", "llm-hangs"]
)
def test_an_llm_that_fails_or_hangs_leaves_the_call_to_end_cleanly(
    stream: type[_ScriptedStream], tmp_path: Path
) -> None:
    (r,) = _replay([_inline(INBOUND, tmp_path)], _replayer(_models(FaultyLLM(stream))))
    res = r.result
    assert res.disposition == "completed"  # the caller hung up; the call ended on it
    assert res.duration <= 20.0
    failed = [f.actual for f in res.failures if f.key == "runtime.model"]
    if stream is _MidStreamFailure:
        # the call ended normally, but the result says the model failed
        assert not res.ok and failed and all(f.startswith("llm: ") for f in failed), failed
    else:
        assert res.ok, res.failures
    # every committed turn was settled one way or another: nothing waits forever
    turns = {m.turn_id for m in r.messages if m.kind == "user_turn_completed"}
    settled = {m.turn_id for m in r.messages if m.kind == "turn_settled"}
    assert turns and turns <= settled


def test_an_amd_classifier_that_raises_falls_back_and_amd_still_decides() -> None:
    call = _call("vm-personal-beep")
    classifier = ScriptedDecisionModel(fail=RuntimeError("classifier down"))
    models = _models(ScriptedLLM(), amd_classifier=classifier)
    (r,) = _replay([call], _replayer(models))
    res = r.result
    assert res.amd is not None and res.amd.category == call.expect.amd
    assert res.disposition == call.expect.disposition
    assert res.ok, res.failures


def test_a_replay_observer_that_raises_makes_the_result_fail_not_a_partial_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a subscriber's exception dropped it silently and the result said ok."""
    real = CallObserver.on_message

    def flaky(self: CallObserver, msg: Any) -> None:
        if msg.kind == "agent_turn_completed":
            raise ValueError("observer bug")
        real(self, msg)

    monkeypatch.setattr(CallObserver, "on_message", flaky)
    (r,) = _replay([_inline(INBOUND, tmp_path)], _replayer(_models(ScriptedLLM())))
    res = r.result
    assert not res.ok
    [failure] = [f for f in res.failures if f.key == "runtime.subscriber"]
    assert "agent_turn_completed" in failure.actual and "ValueError" in failure.actual
    # it kept receiving: the call's end (after the failures) was still recorded
    assert res.disposition == "completed"
    assert '"failures":[{"key":"runtime.subscriber"' in res.to_json_line()
