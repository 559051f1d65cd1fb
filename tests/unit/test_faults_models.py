"""Fault injection into the speech models and tools of real replays (docs/faults.md).

Each replay runs the real actors and livekit's ``AgentSession`` text-only on the
virtual clock; the faults are fakes implementing livekit's interfaces (an
``stt.RecognizeStream`` that raises or never answers, a ``tts.ChunkedStream``
that raises after its first audio) or a configured tool that raises.
``_replay`` asserts that no task of the call is left running; each test asserts
the disposition, the bound, and that the result is written whole (it
serialises with every turn).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import APIConnectionError, stt, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

import agent.replay.runner as replay_runner
from agent.app.call import ModelSet
from agent.app.config import AgentConfig
from agent.models.estimate_tts import EstimateChunkedStream, EstimateTTS
from agent.models.script_llm import ScriptLLM
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT, _FeedStream
from tests.fakes.models import ScriptedLLM
from tests.unit.test_faults import INBOUND
from tests.unit.test_replay_calls import _inline, _replay

pytestmark = pytest.mark.timeout(60)

#: the caller hangs up 16.8 s in: every faulty call must have ended by then
CALLER_HANGS_UP = 16.835

LOOKUPS: list[str] = []


async def lookup_balance(account: str) -> str:
    """Look up the balance of the caller's account.

    Args:
        account: The account number.
    """
    LOOKUPS.append(account)
    raise RuntimeError("billing backend down")


class _RaisingFeed(_FeedStream):
    """Hears nothing, then fails the way a provider's stream does."""

    async def _run(self) -> None:
        await asyncio.sleep(0.5)
        raise APIConnectionError("stt connection lost")


class _SilentFeed(_FeedStream):
    """Takes the audio and never answers."""

    async def _run(self) -> None:
        async for _ in self._input_ch:
            pass
        await asyncio.Event().wait()


def _faulty_feed(stream: type[_FeedStream]) -> type[TranscriptFeedSTT]:
    class FaultyFeedSTT(TranscriptFeedSTT):
        def stream(
            self,
            *,
            language: Any = None,
            conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        ) -> stt.RecognizeStream:
            s = stream(stt=self, conn_options=conn_options)
            self._streams.append(s)
            return s

    return FaultyFeedSTT


class _MidSentenceFailure(EstimateChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id="tts_fault",
            sample_rate=self._tts.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        output_emitter.push(bytes(2 * 3200))  # 0.2 s of the sentence, then the failure
        raise APIConnectionError("tts connection lost")


class FailingTTS(EstimateTTS):
    """Every sentence fails after its first 0.2 s of audio."""

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> EstimateChunkedStream:
        return _MidSentenceFailure(tts=self, input_text=text, conn_options=conn_options)


def _replayer(llm: Any = None, *, tts_model: tts.TTS | None = None, **config: Any) -> Replayer:
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=llm or ScriptedLLM(),
        tts=tts_model or EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    return Replayer(AgentConfig(**config), ReplayOptions(text_only=True), models=models)


def _written_whole(r: ReplayedCall) -> dict[str, Any]:
    line = json.loads(r.result.to_json_line())
    assert line["disposition"] == r.result.disposition
    assert len(line["turns"]) == len(r.result.turns)
    return line


@pytest.mark.parametrize("stream", [_RaisingFeed, _SilentFeed], ids=["stt-raises", "stt-hangs"])
def test_an_stt_that_fails_or_hangs_leaves_a_deaf_call_that_still_ends(
    stream: type[_FeedStream], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # text-only replays make a fresh transcript feed per call: inject there
    monkeypatch.setattr(replay_runner, "TranscriptFeedSTT", _faulty_feed(stream))
    (r,) = _replay([_inline(INBOUND, tmp_path)], _replayer())
    res = r.result
    # the agent greets, never hears the caller, and the call ends on the hang-up
    assert res.disposition == "completed"
    assert res.duration <= CALLER_HANGS_UP + 1.0
    assert [t.role for t in res.turns] == ["agent"]
    assert not [m for m in r.messages if m.kind == "user_turn_completed"]
    failed = [f.actual for f in res.failures if f.key == "runtime.model"]
    if stream is _RaisingFeed:
        # the call ended normally, but the result says it went deaf
        assert not res.ok and failed and all(f.startswith("stt: ") for f in failed), failed
    else:
        # a recogniser that never answers raises nothing; the call only goes deaf
        assert failed == []
    _written_whole(r)


def test_a_tts_that_fails_mid_sentence_settles_every_turn_and_the_call_ends(
    tmp_path: Path,
) -> None:
    (r,) = _replay([_inline(INBOUND, tmp_path)], _replayer(tts_model=FailingTTS()))
    res = r.result
    assert res.disposition == "completed"
    assert res.duration <= CALLER_HANGS_UP + 1.0
    # the caller was heard; no reply was spoken, and no turn waits forever
    assert [t.role for t in res.turns] == ["callee", "callee"]
    turns = {m.turn_id for m in r.messages if m.kind == "user_turn_completed"}
    settled = {m.turn_id for m in r.messages if m.kind == "turn_settled"}
    assert len(turns) == 2 and turns <= settled
    failed = [f.actual for f in res.failures if f.key == "runtime.model"]
    assert not res.ok and failed and all(f.startswith("tts: ") for f in failed), failed
    _written_whole(r)


TOOL_SCRIPT = """
replies:
  - when: 'CALL_OPENING'
    say: "Hello, this is Sam from Acme."
  - when: 'bill'
    say: "Let me look that up."
    tool: {name: lookup_balance, arguments: {account: "A1"}}
after_tool:
  - when: 'lookup_balance'
    say: "Sorry, I cannot see your balance right now."
default: "Okay."
"""


def test_a_tool_that_raises_is_answered_and_the_call_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "replies.yaml"
    script.write_text(TOOL_SCRIPT)
    LOOKUPS.clear()
    replayer = _replayer(
        ScriptLLM.from_file(script),
        tools=[{"function": "tests.unit.test_faults_models:lookup_balance", "side_effects": False}],
    )
    (r,) = _replay([_inline(INBOUND, tmp_path)], replayer)
    res = r.result
    assert LOOKUPS == ["A1"]  # the tool ran and raised
    said = [t.text for t in res.turns if t.role == "agent"]
    # the failure went back to the model, which answered the caller; the call went on
    assert any("cannot see your balance" in s for s in said), said
    assert res.disposition == "completed"
    assert res.duration <= CALLER_HANGS_UP + 1.0
    _written_whole(r)
