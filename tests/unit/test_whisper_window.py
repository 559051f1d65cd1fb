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


class _Decodes:
    """Stands in for one Whisper decode: answers per window, records the windows asked."""

    def __init__(self, fitted: str, full: str) -> None:
        self.answers = {"fitted": fitted, "full": full}
        self.windows: list[int | None] = []

    def __call__(self, *_args: object, window: int | None, max_new_tokens: int | None) -> object:
        from agent.models.whisper_stt import Decoded

        self.windows.append(window)
        return Decoded(self.answers["full" if window is None else "fitted"], 0.5)


@pytest.mark.parametrize(
    ("fitted", "full", "expected", "decodes"),
    [
        ("Yeah.", "Yeah!", "Yeah.", 1),  # the fitted window heard it: no second decode
        ("", "Yeah.", "Yeah.", 2),  # it lost the word: the full window is asked
        ("", "", "", 2),  # nothing in either (noise): still nothing
        ("Hello? Hello? Hello?", "Hello?", "Hello?", 2),  # looped
    ],
)
def test_a_fitted_decode_that_loses_every_word_or_loops_is_done_again_in_the_full_window(
    monkeypatch: pytest.MonkeyPatch, fitted: str, full: str, expected: str, decodes: int
) -> None:
    import numpy as np

    from agent.models import whisper_stt

    fake = _Decodes(fitted, full)
    monkeypatch.setattr(whisper_stt, "_decode", fake)
    audio = np.zeros(whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32)  # 1 s
    got = whisper_stt.decode_blocking(
        object(),  # type: ignore[arg-type]
        audio,
        language="en",
        beam_size=5,
        fit_window=True,
    )
    assert got.text == expected
    assert len(fake.windows) == decodes
    assert fake.windows[0] == whisper_stt.MIN_WINDOW + 2  # ceil(1 s + 3 s pad)
    if decodes == 2:
        assert fake.windows[1] is None
