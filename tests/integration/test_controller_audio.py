"""Control markers never reach the audio: the recorded WAVs of the controller suite show it.

The [END_CALL] and [TRANSFER:billing] calls are replayed through the full local
audio stack (Silero, Whisper, Piper; the reply script stands in for the LLM)
with recordings; whisper then transcribes the agent's channel. The sentences
before the markers are heard; the markers and the text after them are not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from agent.app.config import load_config
from agent.core import clock
from agent.replay.loader import load_paths
from agent.replay.runner import Replayer, ReplayOptions
from tests.conftest import CALLS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SUITE = CALLS / "controller"


def _heard(path: Path) -> str:
    from agent.models.whisper_stt import WhisperOptions, load_whisper_model

    audio, rate = sf.read(path, dtype="float32")
    agent_channel = np.ascontiguousarray(audio[:, 1])
    assert np.abs(agent_channel).max() > 0.01  # the agent did speak
    if rate != 16000:
        import soxr

        agent_channel = soxr.resample(agent_channel, rate, 16000)
    model = load_whisper_model(WhisperOptions())
    segments, _ = model.transcribe(agent_channel, language="en", beam_size=5)
    return " ".join(s.text for s in segments).lower()


def test_markers_are_not_in_the_recorded_audio(tmp_path: Path) -> None:
    names = {"end-call-marker", "transfer-to-billing"}
    calls = [c for c in load_paths([SUITE]) if c.name in names]
    replayer = Replayer(
        load_config(SUITE / "agent.yaml"), ReplayOptions(text_only=False, record_dir=tmp_path)
    )
    results = {r.result.name: r for r in clock.run(replayer.replay_all(calls))}
    assert {n: r.result.failures for n, r in results.items()} == {n: [] for n in names}
    assert results["transfer-to-billing"].result.disposition == "transferred"

    goodbye = _heard(tmp_path / "end-call-marker.wav")
    assert "goodbye" in goodbye, goodbye
    assert "end call" not in goodbye and "end_call" not in goodbye, goodbye
    # nothing after the marker was said: the goodbye is the last thing heard
    assert goodbye.rstrip(" .!").endswith("goodbye"), goodbye

    transfer = _heard(tmp_path / "transfer-to-billing.wav")
    assert "billing team" in transfer, transfer
    assert "transfer billing" not in transfer and "transfer: billing" not in transfer, transfer
    assert transfer.rstrip(" .!").endswith("billing team"), transfer
