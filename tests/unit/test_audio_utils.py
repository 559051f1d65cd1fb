"""Pure audio utilities of the call simulator: resampling, line model, tones, files."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from agent.telephony.audio import (
    AudioFileError,
    frames,
    from_int16,
    load_audio,
    resample,
    to_int16,
)
from agent.telephony.line import LineModel, alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from agent.telephony.sim.recording import StereoRecorder
from agent.telephony.sim.speech_cache import SpeechCache
from agent.telephony.sim.tones import dominant_frequencies, dtmf_tones, silence, sit_tone, tone


def rms_db(x: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(np.square(x, dtype=np.float64)) + 1e-30))


def sine(hz: float, seconds: float, sr: int, amplitude: float = 0.5) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * hz * np.arange(round(seconds * sr)) / sr)).astype(
        np.float32
    )


# -- resampling and conversions ---------------------------------------------


@pytest.mark.parametrize(("src", "dst"), [(16000, 8000), (44100, 16000), (8000, 48000)])
def test_resample_keeps_a_tone_and_the_duration(src: int, dst: int) -> None:
    y = resample(sine(440, 1.0, src), src, dst)
    assert y.dtype == np.float32
    assert len(y) == dst
    assert dominant_frequencies(y, dst, n=1)[0] == pytest.approx(440, abs=1)
    assert rms_db(y[dst // 10 : -dst // 10]) == pytest.approx(rms_db(sine(440, 1.0, src)), abs=0.1)


def test_downsampling_removes_rather_than_folds_content_above_nyquist() -> None:
    # 6 kHz at 16 kHz would alias to 2 kHz at 8 kHz without an anti-aliasing filter.
    y = resample(sine(6000, 1.0, 16000), 16000, 8000)
    assert rms_db(y[800:-800]) < rms_db(sine(6000, 1.0, 16000)) - 60


def test_int16_conversion_round_trips_and_clips() -> None:
    pcm = np.array([-32768, -1, 0, 1, 32767], dtype=np.int16)
    assert np.array_equal(to_int16(from_int16(pcm)), pcm)
    assert to_int16(np.array([2.0, -2.0, 0.5], dtype=np.float32)).tolist() == [32767, -32768, 16384]


def test_frames_are_fixed_size_with_a_zero_padded_tail() -> None:
    x = np.arange(1, 801, dtype=np.float32) / 1000  # 50 ms at 16 kHz
    chunks = list(frames(x, 16000, frame_ms=20))
    assert [len(c) for c in chunks] == [320, 320, 320]
    assert np.array_equal(np.concatenate(chunks)[:800], x)
    assert not chunks[-1][160:].any()
    assert list(frames(np.zeros(0, dtype=np.float32), 16000)) == []
    with pytest.raises(ValueError, match="whole number of samples"):
        list(frames(x, 11025, frame_ms=10))


# -- audio files ------------------------------------------------------------


def test_load_audio_downmixes_stereo_and_resamples(tmp_path: Path) -> None:
    left = sine(440, 1.5, 44100, amplitude=0.6)
    path = tmp_path / "greeting.wav"
    sf.write(path, np.stack([left, np.zeros_like(left)], axis=1), 44100, subtype="PCM_16")
    y = load_audio(path, 16000)
    assert y.dtype == np.float32 and y.ndim == 1
    assert len(y) == 24000
    # Averaging the channels halves the tone: 0.6 peak -> 0.3 peak.
    assert rms_db(y[1600:-1600]) == pytest.approx(20 * np.log10(0.3 / np.sqrt(2)), abs=0.1)
    assert dominant_frequencies(y, 16000, n=1)[0] == pytest.approx(440, abs=1)


def test_load_audio_reads_flac_and_ogg(tmp_path: Path) -> None:
    x = sine(1000, 0.5, 22050)
    for name in ("a.flac", "a.ogg"):
        sf.write(tmp_path / name, x, 22050)
        y = load_audio(tmp_path / name, 8000)
        assert len(y) == 4000
        assert dominant_frequencies(y, 8000, n=1)[0] == pytest.approx(1000, abs=2)


def test_unreadable_audio_files_name_the_path(tmp_path: Path) -> None:
    garbage = tmp_path / "not-audio.wav"
    garbage.write_bytes(b"this is not a wav file at all")
    empty = tmp_path / "empty.wav"
    sf.write(empty, np.zeros(0, dtype=np.float32), 16000)
    for path, reason in [
        (garbage, "not a readable audio file"),
        (empty, "no audio samples"),
        (tmp_path / "missing.wav", "no such file"),
        (tmp_path, "not a regular file"),
    ]:
        with pytest.raises(AudioFileError) as err:
            load_audio(path, 16000)
        message = str(err.value)
        assert str(path) in message and reason in message
        assert "\n" not in message
        assert err.value.path == path


# -- G.711 ------------------------------------------------------------------

# (16-bit linear, μ-law code, A-law code), from the ITU-T G.711 / G.191 reference coders.
KNOWN_CODES = [
    (0, 0xFF, 0xD5),
    (-1, 0x7E, 0x55),
    (100, 0xF2, 0xD3),
    (1000, 0xCE, 0xFA),
    (-1000, 0x4E, 0x7A),
    (8000, 0xA0, 0x8A),
    (32767, 0x80, 0xAA),
    (-32768, 0x00, 0x2A),
]


@pytest.mark.parametrize(("pcm", "ulaw", "alaw"), KNOWN_CODES)
def test_g711_encodes_known_values(pcm: int, ulaw: int, alaw: int) -> None:
    assert ulaw_encode(np.array([pcm]))[0] == ulaw
    assert alaw_encode(np.array([pcm]))[0] == alaw


def test_g711_decodes_known_values() -> None:
    codes = np.array([0xFF, 0x7F, 0x80, 0x00, 0xD5, 0x55, 0xAA, 0x2A], dtype=np.uint8)
    assert ulaw_decode(codes[:4]).tolist() == [0, 0, 32124, -32124]
    assert alaw_decode(codes[4:]).tolist() == [8, -8, 32256, -32256]


@pytest.mark.parametrize(
    ("encode", "decode", "small_error", "relative_error"),
    [(ulaw_encode, ulaw_decode, 11, 0.051), (alaw_encode, alaw_decode, 8, 0.032)],
)
def test_g711_round_trip_error_is_bounded(encode, decode, small_error, relative_error) -> None:
    pcm = np.arange(-32768, 32768, dtype=np.int32)
    error = np.abs(decode(encode(pcm)).astype(np.int32) - pcm)
    small = np.abs(pcm) < 256
    assert error[small].max() <= small_error
    assert (error[~small] / np.abs(pcm[~small])).max() <= relative_error
    # Every code decodes to a value that encodes back to the same code.
    codes = np.arange(256, dtype=np.uint8)
    same = encode(decode(codes)) == codes
    assert same.sum() >= 255  # μ-law has two zeros (0x7F and 0xFF)


def test_g711_matches_the_reference_coder_bit_for_bit() -> None:
    audioop = pytest.importorskip("audioop")  # stdlib up to Python 3.12
    pcm = np.arange(-32768, 32768, dtype=np.int16)
    assert ulaw_encode(pcm).tobytes() == audioop.lin2ulaw(pcm.tobytes(), 2)
    assert alaw_encode(pcm).tobytes() == audioop.lin2alaw(pcm.tobytes(), 2)
    codes = np.arange(256, dtype=np.uint8).tobytes()
    assert ulaw_decode(np.frombuffer(codes, np.uint8)).tobytes() == audioop.ulaw2lin(codes, 2)
    assert alaw_decode(np.frombuffer(codes, np.uint8)).tobytes() == audioop.alaw2lin(codes, 2)


# -- the line model -----------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "pcmu", "pcma"])
@pytest.mark.parametrize("sr", [16000, 24000, 22050])
def test_line_passes_speech_band_and_blocks_above_4khz(codec: str, sr: int) -> None:
    line = LineModel(codec=codec)  # type: ignore[arg-type]
    mid = slice(sr // 10, -sr // 10)
    passed = line.apply(sine(1000, 1.0, sr), sr)
    assert len(passed) == sr
    assert rms_db(passed[mid]) - rms_db(sine(1000, 1.0, sr)[mid]) > -1.0
    # Time-aligned, linear phase: the output is the input plus quantisation noise.
    # (1013 Hz: a tone locked to the 8 kHz clock makes periodic, atypical G.711 error.)
    x = sine(1013, 1.0, sr)
    snr = rms_db(x[mid]) - rms_db(line.apply(x, sr)[mid] - x[mid])
    assert snr > (35 if codec != "none" else 60)
    blocked = line.apply(sine(6000, 1.0, sr), sr)
    assert rms_db(blocked[mid]) < rms_db(sine(6000, 1.0, sr)[mid]) - 60


def test_g711_line_quantisation_noise_is_telephone_grade() -> None:
    x = sine(440, 1.0, 8000, amplitude=10 ** (-20 / 20))
    for codec in ("pcmu", "pcma"):
        y = LineModel(codec=codec).apply(x, 8000)  # type: ignore[arg-type]
        assert 33 < rms_db(x) - rms_db(y - x) < 45  # G.711 SQNR is ~38 dB at this level


@pytest.mark.parametrize("sr", [8000, 16000, 48000])
def test_line_noise_has_the_requested_level_and_is_deterministic(sr: int) -> None:
    quiet = np.zeros(3 * sr, dtype=np.float32)
    line = LineModel(codec="pcmu", noise_db=-40, seed=7)
    a = line.apply(quiet, sr)
    assert rms_db(a) == pytest.approx(-40, abs=1.0)
    assert np.array_equal(a, line.apply(quiet, sr))
    assert not np.array_equal(a, LineModel(codec="pcmu", noise_db=-40, seed=8).apply(quiet, sr))


@pytest.mark.parametrize("codec", ["none", "pcma"])
def test_streamed_line_equals_whole_signal_after_the_fixed_latency(codec: str) -> None:
    sr = 16000
    x = (0.2 * np.random.default_rng(3).standard_normal(2 * sr)).astype(np.float32)
    line = LineModel(codec=codec, noise_db=-45, seed=1)  # type: ignore[arg-type]
    channel = line.channel(sr)
    out = [channel.process(x[i : i + 320]) for i in range(0, len(x), 320)]
    assert all(len(o) == 320 for o in out)
    assert channel.latency / sr < 0.010
    streamed = np.concatenate([*out, channel.flush()])[channel.latency :]
    whole = line.apply(x, sr)
    assert len(streamed) == len(whole)
    # Identical but for float32 rounding (whole signals are filtered by FFT), which
    # can rarely tip a G.711 code over a decision level.
    close = np.abs(streamed - whole) <= 1e-5
    assert close.mean() > 0.999
    assert np.abs(streamed - whole).max() < 0.05


@pytest.mark.parametrize("sr", [8000, 16000, 48000])
def test_streamed_line_handles_ragged_chunks(sr: int) -> None:
    x = (0.2 * np.random.default_rng(5).standard_normal(sr)).astype(np.float32)
    line = LineModel(noise_db=-50, seed=2)
    channel = line.channel(sr)
    sizes = np.random.default_rng(6).integers(0, 700, size=10_000)
    bounds = np.minimum(np.cumsum(np.concatenate([[0], sizes])), len(x))
    out = [channel.process(x[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert [len(o) for o in out] == list(np.diff(bounds))
    streamed = np.concatenate([*out, channel.flush()])[channel.latency :]
    np.testing.assert_allclose(streamed, line.apply(x, sr), atol=1e-5)


def test_line_channel_needs_a_multiple_of_the_line_rate() -> None:
    with pytest.raises(ValueError, match="multiple of the 8000 Hz line rate"):
        LineModel().channel(22050)
    with pytest.raises(ValueError, match="codec"):
        LineModel(codec="g729")  # type: ignore[arg-type]


def test_line_model_is_fast() -> None:
    x = sine(440, 60.0, 16000, amplitude=0.3)
    line = LineModel(codec="pcmu", noise_db=-45)
    line.apply(x[:16000], 16000)
    best = min(_timed(lambda: line.apply(x, 16000)) for _ in range(3))
    assert best < 0.25  # ~20 ms on a 2-core dev machine; generous for a loaded CI


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- tones ------------------------------------------------------------------


def test_tone_level_and_ramps() -> None:
    x = tone(1000, 1.0, 16000, level_db=-12)
    assert len(x) == 16000
    assert 20 * np.log10(np.abs(x).max()) == pytest.approx(-12, abs=0.01)
    assert rms_db(x[800:-800]) == pytest.approx(-12 - 3.01, abs=0.05)
    assert abs(x[0]) < 1e-6 and abs(x[-1]) < 1e-3
    assert np.abs(x[:40]).max() < np.abs(x[40:80]).max()  # fading in over 5 ms


def test_dual_tone_contains_both_frequencies_without_clipping() -> None:
    x = tone([440, 620], 0.5, 8000, level_db=0)
    assert sorted(dominant_frequencies(x, 8000)) == pytest.approx([440, 620], abs=1)
    assert np.abs(x).max() <= 1.0
    assert rms_db(x[400:-400]) == pytest.approx(-10 * np.log10(4), abs=0.1)


def test_dtmf_digits_have_the_standard_frequency_pairs() -> None:
    x = dtmf_tones("5", 8000)
    assert sorted(dominant_frequencies(x, 8000)) == pytest.approx([770, 1336], abs=3)
    seq = dtmf_tones("1#d", 16000, tone_ms=100, gap_ms=60)
    assert len(seq) == 16000 * (3 * 100 + 2 * 60) // 1000
    pairs = [sorted(dominant_frequencies(seq[s : s + 1600], 16000)) for s in (0, 2560, 5120)]
    assert pairs == [
        pytest.approx([697, 1209], abs=3),
        pytest.approx([941, 1477], abs=3),
        pytest.approx([941, 1633], abs=3),
    ]
    assert not seq[1600:2560].any()
    with pytest.raises(ValueError, match="'x'"):
        dtmf_tones("12x", 8000)


def test_sit_tone_and_silence() -> None:
    x = sit_tone(8000)
    assert len(x) == round(0.928 * 8000)
    bounds = [(0, 2192), (2192, 4384), (4384, 7424)]
    found = [dominant_frequencies(x[a:b], 8000, n=1)[0] for a, b in bounds]
    assert found == pytest.approx([913.8, 1370.6, 1776.7], abs=1)
    assert silence(0.25, 16000).tolist() == [0.0] * 4000


# -- stereo recording -------------------------------------------------------


def test_recorder_places_audio_by_time_and_writes_stereo_wav(tmp_path: Path) -> None:
    rec = StereoRecorder(8000)
    rec.add("callee", 0.5, np.full(800, 0.25, dtype=np.float32))
    rec.add("agent", 1.0, np.full(400, -0.5, dtype=np.float32))
    rec.add("agent", 1.025, np.full(400, -0.75, dtype=np.float32))  # overlaps: sums, clips
    assert rec.duration == pytest.approx(1.075)
    path = tmp_path / "call.wav"
    rec.write(path)
    data, sr = sf.read(path, dtype="float32")
    info = sf.info(path)
    assert (sr, info.channels, info.subtype) == (8000, 2, "PCM_16")
    assert data.shape == (8600, 2)
    left, right = data[:, 0], data[:, 1]
    assert not left[:4000].any() and np.allclose(left[4000:4800], 0.25) and not left[4800:].any()
    assert not right[:8000].any()
    assert np.allclose(right[8000:8200], -0.5)
    assert np.allclose(right[8200:8400], -1.0)  # -0.5 + -0.75 clipped
    assert np.allclose(right[8400:8600], -0.75)
    assert os.listdir(tmp_path) == ["call.wav"]


def test_recorder_write_leaves_nothing_behind_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = StereoRecorder(8000)
    rec.add("callee", 0.0, np.full(80, 0.1, dtype=np.float32))
    with pytest.raises(FileNotFoundError):
        rec.write(tmp_path / "missing-dir" / "call.wav")
    assert os.listdir(tmp_path) == []

    target = tmp_path / "call.wav"
    target.write_bytes(b"previous recording")

    def broken_write(*args, **kwargs):
        args[0].write(b"RIFF partial")
        raise OSError("disk full")

    monkeypatch.setattr(sf, "write", broken_write)
    with pytest.raises(OSError, match="disk full"):
        rec.write(target)
    assert os.listdir(tmp_path) == ["call.wav"]
    assert target.read_bytes() == b"previous recording"


# -- speech cache -----------------------------------------------------------


class CountingSynth:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, text: str, sample_rate: int) -> np.ndarray:
        with self._lock:
            self.calls.append((text, sample_rate))
        time.sleep(0.01)
        return tone(200 + len(text), 0.05 * len(text), sample_rate)


def test_speech_cache_hits_memory_then_disk(tmp_path: Path) -> None:
    synth = CountingSynth()
    cache = SpeechCache(tmp_path, synth, voice_id="joe-medium")
    first = cache.get("Hello there", 16000)
    assert np.array_equal(cache.get("Hello there", 16000), first)
    assert synth.calls == [("Hello there", 16000)]
    assert not first.flags.writeable

    cache.get("Hello there", 8000)
    SpeechCache(tmp_path, synth, voice_id="other-voice").get("Hello there", 16000)
    assert len(synth.calls) == 3  # rate and voice are part of the key

    fresh = SpeechCache(tmp_path, synth, voice_id="joe-medium")
    assert np.array_equal(fresh.get("Hello there", 16000), first)
    assert len(synth.calls) == 3
    assert fresh.path("Hello there", 16000).is_file()
    assert not list(tmp_path.rglob("*.tmp"))


def test_speech_cache_replaces_a_corrupt_file(tmp_path: Path) -> None:
    synth = CountingSynth()
    cache = SpeechCache(tmp_path, synth, voice_id="v")
    good = cache.get("Hi", 16000)
    cache.path("Hi", 16000).write_bytes(b"\x93NUMPY truncated")
    again = SpeechCache(tmp_path, synth, voice_id="v").get("Hi", 16000)
    assert np.array_equal(again, good) and len(synth.calls) == 2
    assert len(SpeechCache(tmp_path, synth, voice_id="v").get("Hi", 16000)) == len(good)
    assert len(synth.calls) == 2


def test_speech_cache_synthesises_once_under_concurrency(tmp_path: Path) -> None:
    synth = CountingSynth()
    cache = SpeechCache(tmp_path, synth, voice_id="v", memory_items=1)
    texts = ["one", "two", "three"] * 8
    results: dict[int, np.ndarray] = {}

    def worker(i: int) -> None:
        results[i] = cache.get(texts[i], 16000)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(synth.calls) == [("one", 16000), ("three", 16000), ("two", 16000)]
    for i, text in enumerate(texts):
        assert len(results[i]) == round(0.05 * len(text) * 16000)
