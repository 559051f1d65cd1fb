"""Audio replays through the real local models (Silero, whisper, SmolLM2, Piper).

Slow-ish (model inference); assertions are about what was heard and said,
never about wall-clock speed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import soundfile as sf

from agent.app.config import load_config
from agent.core import clock
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from tests.conftest import CALLS, DEMO
from tests.latency_checks import answered_callee_turns, check_breakdown

pytestmark = pytest.mark.integration


def _replay(path: Path, record_dir: Path) -> ReplayedCall:
    call = load_paths([path])[0]
    replayer = Replayer(load_config(), ReplayOptions(text_only=False, record_dir=record_dir))

    async def main() -> ReplayedCall:
        out = await replayer.replay(call)
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == [], [t.get_name() for t in leftover]
        return out

    return clock.run(main())


def _words(text: str) -> set[str]:
    return {w.strip(".,?!'\"").lower() for w in text.split()}


def test_human_conversation_is_heard_answered_and_recorded(tmp_path: Path) -> None:
    r = _replay(DEMO / "demo-human-conversation.call.yaml", tmp_path)
    res = r.result
    assert res.ok and res.disposition == "completed"
    callee = [t for t in res.turns if t.role == "callee"]
    agent = [t for t in res.turns if t.role == "agent"]
    # whisper heard the callee through the 8 kHz line
    assert "priya" in _words(callee[0].text)
    assert {"furniture", "delivery", "friday"} & _words(" ".join(t.text for t in callee))
    # the agent answered each callee turn with real speech, after the callee stopped
    assert len(agent) >= 2 and all(t.text for t in agent)
    assert agent[0].start >= callee[0].end
    assert r.latencies and all(lat >= 0 for lat in r.latencies)
    # the latency gate: every answered turn carries its stages, VAD and STT included
    answered = answered_callee_turns(res)
    assert len(answered) >= 2
    for turn in answered:
        check_breakdown(turn, audio=True)
    info = sf.info(str(tmp_path / "demo-human-conversation.wav"))
    assert info.channels == 2 and info.duration == pytest.approx(res.duration, abs=1.0)
    audio, _ = sf.read(str(tmp_path / "demo-human-conversation.wav"))
    assert abs(audio[:, 0]).max() > 0.05 and abs(audio[:, 1]).max() > 0.05  # both sides spoke


def test_voicemail_with_beep_and_recorded_audio_file(tmp_path: Path) -> None:
    r = _replay(CALLS / "human-recorded-audio.call.yaml", tmp_path)
    res = r.result
    assert res.ok and res.disposition == "completed"
    callee = [t for t in res.turns if t.role == "callee"]
    assert callee and "hello" in _words(callee[0].text)
    assert any(t.role == "agent" and t.text for t in res.turns)
