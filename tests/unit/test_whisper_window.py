"""The fitted Whisper window: what counts as a looped decode, and what a decode leaves behind."""

from __future__ import annotations

import pytest

from agent.models.whisper_stt import _encoder_window, looks_looped


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Hello? Hello? Hello?", 0.6),
        ("Do I need to bring my insurance card? Do I need to bring my insurance card?", 2.9),
        ("the number is on your card the number is on your", 4.0),
        ("yes " * 30, 3.0),  # far more words than anyone says in 3 s
    ],
)
def test_a_decode_that_repeats_itself_reads_as_looped(text: str, seconds: float) -> None:
    assert looks_looped(text, seconds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Hello, this is Priya.", 1.5),
        ("Oh, the furniture delivery. Is it still coming on Friday?", 3.7),
        ("For billing, press two. To speak with an agent, say agent.", 4.0),
        ("", 1.0),
    ],
)
def test_ordinary_utterances_do_not(text: str, seconds: float) -> None:
    assert not looks_looped(text, seconds)


def test_the_encoder_window_is_given_back_after_a_decode_even_one_that_fails() -> None:
    import faster_whisper.transcribe as fw_transcribe
    import numpy as np

    original = fw_transcribe.pad_or_trim
    features = np.zeros((80, 120), dtype=np.float32)
    with pytest.raises(RuntimeError), _encoder_window(400):
        # inside, segments are padded to the 4 s window (400 frames), not 30 s
        assert fw_transcribe.pad_or_trim(features).shape == (80, 400)
        raise RuntimeError("decode failed")
    assert fw_transcribe.pad_or_trim is original
    assert fw_transcribe.pad_or_trim(features).shape == (80, 3000)
    with _encoder_window(None):
        assert fw_transcribe.pad_or_trim is original
