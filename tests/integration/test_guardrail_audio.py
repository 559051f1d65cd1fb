"""A sentence with a card number never reaches the audio: the recorded WAV shows it.

The card-number call is replayed through the full local stack with a recording;
whisper then transcribes the agent's channel of the stereo WAV. The allowed
first sentence and the replacement are heard; no digits of the card are.
"""

from __future__ import annotations

import re
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


def test_the_card_number_is_not_in_the_recorded_audio(tmp_path: Path) -> None:
    call = load_paths([CALLS / "guardrails" / "card-number-never-spoken.call.yaml"])[0]
    replayer = Replayer(load_config(), ReplayOptions(text_only=False, record_dir=tmp_path))
    (r,) = clock.run(replayer.replay_all([call]))
    assert r.result.ok, r.result.failures
    agent_text = " ".join(t.text for t in r.result.turns if t.role == "agent")
    assert "Acme Bank" in agent_text and not re.search(r"\d{4}", agent_text)

    audio, rate = sf.read(tmp_path / f"{call.name}.wav", dtype="float32")
    agent_channel = np.ascontiguousarray(audio[:, 1])
    assert np.abs(agent_channel).max() > 0.01  # the agent did speak

    from agent.models.whisper_stt import WhisperOptions, load_whisper_model

    model = load_whisper_model(WhisperOptions())
    if rate != 16000:
        import soxr

        agent_channel = soxr.resample(agent_channel, rate, 16000)
    segments, _ = model.transcribe(agent_channel, language="en", beam_size=5)
    heard = " ".join(s.text for s in segments).lower()
    assert "bank" in heard and "share" in heard, heard  # the greeting, the replacement
    spoken_digits = re.findall(r"\d|\b(?:one|four)\b", heard)
    assert spoken_digits == [], heard
