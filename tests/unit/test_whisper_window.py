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


class _Model:
    """Stands in for faster-whisper's model: records what ``transcribe`` was asked."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.calls: list[dict[str, object]] = []
        self.feature_extractor = SimpleNamespace(
            sampling_rate=16000, hop_length=160, n_samples=480000, nb_max_frames=3000
        )

    def transcribe(self, _audio: object, **kwargs: object) -> tuple[list[object], None]:
        from types import SimpleNamespace

        self.calls.append(kwargs)
        return [SimpleNamespace(start=0.0, end=1.0, text=" Hello.", avg_logprob=-0.2)], None


@pytest.mark.parametrize(("fallback", "temperatures"), [(False, [0.0]), (True, None)])
def test_decodes_sample_at_rising_temperatures_only_when_asked(
    fallback: bool, temperatures: list[float] | None
) -> None:
    import numpy as np

    from agent.models import whisper_stt

    model = _Model()
    got = whisper_stt.decode_blocking(
        model,  # type: ignore[arg-type]
        np.zeros(whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32),
        language="en",
        beam_size=5,
        fit_window=True,
        temperature_fallback=fallback,
    )
    assert got.text == "Hello."
    [call] = model.calls
    # the beam search at temperature 0 alone gives the same words for the same audio
    expected = temperatures if temperatures is not None else [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert call["temperature"] == expected
    assert call["beam_size"] == 5


def _decode_calls(
    monkeypatch: pytest.MonkeyPatch, *decodes: tuple[dict[str, object], str | None]
) -> list[dict[str, object]]:
    """Decode one second of silence, once per ``(options, prompt)``, with the local STT
    built with those options and ``prompt`` given to ``transcribe``, on a stand-in
    model; returns what each decode asked of the model."""
    import numpy as np

    from agent.models import build_stt, whisper_stt

    model = _Model()
    monkeypatch.setattr(whisper_stt, "load_whisper_model", lambda _opts: model)
    audio = np.zeros(whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32)
    for options, prompt in decodes:
        stt = build_stt("local/whisper-tiny.en", **options)
        assert isinstance(stt, whisper_stt.WhisperSTT)
        stt.transcribe(audio, prompt=prompt)
    return model.calls


def test_the_stt_passes_its_fallback_option_to_every_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _decode_calls(monkeypatch, ({}, None), ({"temperature_fallback": True}, None))
    assert [c["temperature"] for c in calls] == [[0.0], [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]]


def test_the_initial_prompt_option_is_the_prompt_of_a_decode_with_nothing_said_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prompted = {"initial_prompt": "Hello?"}
    calls = _decode_calls(
        monkeypatch,
        ({}, None),
        (prompted, None),
        # the words cut before an utterance's tail stay its prompt
        (prompted, "Thanks for calling."),
    )
    assert [c["initial_prompt"] for c in calls] == [None, "Hello?", "Thanks for calling."]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"initial_promt": "Hello?"}, "unknown option(s) initial_promt"),
        ({"initial_prompt": 5}, "initial_prompt: expected text, got int"),
    ],
)
def test_a_bad_stt_option_is_a_model_config_error(
    options: dict[str, object], expected: str
) -> None:
    from agent.models import build_stt
    from agent.models.registry import ModelConfigError

    with pytest.raises(ModelConfigError, match=r"^local/whisper-tiny\.en: ") as err:
        build_stt("local/whisper-tiny.en", **options)
    assert expected in str(err.value)


LOOP = "Thank you very much for watching, and " * 6


@pytest.mark.parametrize(
    ("prompt", "without_prompt", "expected", "decodes"),
    [
        # the prompt tipped both windows into a loop: the audio heard without it wins
        ("Thank you for calling.", "For the paint department, press two.", "For the paint", 3),
        # it loops without the prompt too: the full window's answer stands
        ("Thank you for calling.", LOOP, "Thank you very much", 3),
        # no prompt to drop: two decodes, as before
        (None, "unused", "Thank you very much", 2),
    ],
)
def test_a_prompted_decode_that_loops_in_both_windows_is_done_once_more_without_the_prompt(
    monkeypatch: pytest.MonkeyPatch,
    prompt: str | None,
    without_prompt: str,
    expected: str,
    decodes: int,
) -> None:
    import numpy as np

    from agent.models import whisper_stt

    asked: list[tuple[str | None, int | None]] = []

    def fake(*args: object, window: int | None, max_new_tokens: int | None) -> object:
        given = args[4]
        assert given is None or isinstance(given, str)
        asked.append((given, window))
        return whisper_stt.Decoded(LOOP if given or prompt is None else without_prompt, 0.3)

    monkeypatch.setattr(whisper_stt, "_decode", fake)
    got = whisper_stt.decode_blocking(
        object(),  # type: ignore[arg-type]
        np.zeros(4 * whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32),
        language="en",
        beam_size=5,
        prompt=prompt,
        fit_window=True,
    )
    assert got.text.startswith(expected)
    assert len(asked) == decodes
    assert asked[1] == (prompt, None)  # the full window, with the prompt
    if decodes == 3:
        assert asked[2] == (None, None)


@pytest.mark.parametrize(
    ("text", "seconds", "sparse"),
    [
        # a carrier's recording of almost five seconds, decoded as its last sentence
        ("Please help and try again.", 4.8, True),
        ("Please try again later. Goodbye.", 7.7, True),
        # ordinary speech: two and a half words a second or more
        ("The number you have dialed is not a valid number. Please try again.", 4.8, False),
        ("Hi, this is Tom. I'm not around right now, so leave a message.", 5.0, False),
        # short audio is a whole turn whatever it holds
        ("Yes.", 2.9, False),
        # nothing heard is music, a tone or noise: not words left out
        ("", 6.0, False),
        ("... ... ...", 6.0, False),
    ],
)
def test_a_decode_with_too_few_words_for_its_audio_reads_as_sparse(
    text: str, seconds: float, sparse: bool
) -> None:
    from agent.models.whisper_stt import looks_sparse

    assert looks_sparse(text, seconds) is sparse


def test_word_count_counts_only_tokens_with_letters_or_digits() -> None:
    from agent.models.whisper_stt import word_count

    assert word_count("Press 1 ... for sales -") == 4
    assert word_count("") == 0


@pytest.mark.parametrize(
    ("plain", "stamped", "expected", "decodes"),
    [
        # the decode without timestamps ended early: the stamped one walked the audio
        (
            "Please try again later.",
            "The subscriber is not available. Please try again later.",
            "The subscriber is not available.",
            2,
        ),
        # the stamped decode heard no more: the first one stands
        ("Please try again later.", "Please try again later.", "Please try again later.", 2),
        # the stamped decode loops: the first one stands
        ("Please try again later.", "Please hold. " * 12, "Please try again later.", 2),
        # enough words for the audio: no second decode
        (
            "The number you have dialed is not in service. Please try again.",
            "unused",
            "The number you have dialed",
            1,
        ),
    ],
)
def test_a_decode_that_heard_too_few_words_is_done_again_with_timestamps_in_the_full_window(
    monkeypatch: pytest.MonkeyPatch, plain: str, stamped: str, expected: str, decodes: int
) -> None:
    import numpy as np

    from agent.models import whisper_stt

    asked: list[tuple[bool, int | None]] = []

    def fake(*args: object, window: int | None, max_new_tokens: int | None) -> object:
        timestamps = args[5]
        assert isinstance(timestamps, bool)
        asked.append((timestamps, window))
        return whisper_stt.Decoded(stamped if timestamps else plain, 0.4)

    monkeypatch.setattr(whisper_stt, "_decode", fake)
    got = whisper_stt.decode_blocking(
        object(),  # type: ignore[arg-type]
        np.zeros(5 * whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32),
        language="en",
        beam_size=5,
        fit_window=True,
    )
    assert got.text.startswith(expected)
    assert len(asked) == decodes
    assert asked[0] == (False, 8)  # the fitted window: ceil(5 s + 3 s pad)
    if decodes == 2:
        assert asked[1] == (True, None)  # timestamps, Whisper's own window


def test_a_caller_who_asked_for_timestamps_gets_one_decode_however_few_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np

    from agent.models import whisper_stt

    asked: list[bool] = []

    def fake(*args: object, window: int | None, max_new_tokens: int | None) -> object:
        asked.append(bool(args[5]))
        return whisper_stt.Decoded("Yes.", 0.4)

    monkeypatch.setattr(whisper_stt, "_decode", fake)
    got = whisper_stt.decode_blocking(
        object(),  # type: ignore[arg-type]
        np.zeros(9 * whisper_stt.WHISPER_SAMPLE_RATE, dtype=np.float32),
        language="en",
        beam_size=5,
        timestamps=True,
        fit_window=True,
    )
    assert got.text == "Yes."
    assert asked == [True]
