"""ToneListener: which tones on the callee's audio are published as beeps or SIT."""

from __future__ import annotations

import numpy as np
import pytest

from agent.core.messages import AmdTone
from agent.telephony.sim.tones import dtmf_tones, silence, sit_tone, tone
from amd.acoustic import BeepDetector
from amd.actor import ToneListener
from amd.config import AmdConfig

RATES = [8000, 16000]
T0 = 100.0  # loop time of the first frame: events must be on the frames' clock


def listen(x: np.ndarray, sample_rate: int, *, active: bool = True) -> list[AmdTone]:
    """Feeds ``x`` in 20 ms frames from loop time ``T0``; returns what was published."""
    published: list[AmdTone] = []
    listener = ToneListener(sample_rate, AmdConfig(), published.append, "call_1")
    listener.active = active
    n = round(0.02 * sample_rate)
    for i in range(0, x.size - n + 1, n):
        listener.push(T0 + i / sample_rate, x[i : i + n])
    return published


def voice_like(seconds: float, sample_rate: int) -> np.ndarray:
    """A harmonic, gliding, amplitude-modulated signal standing in for a greeting."""
    t = np.arange(round(seconds * sample_rate)) / sample_rate
    f0 = 140 + 20 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    x = sum(np.sin(k * phase) / k for k in range(1, 20))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.1 * x * envelope).astype(np.float32)


@pytest.mark.parametrize("sr", RATES)
async def test_a_beep_then_silence_is_published_once_with_its_edges(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), tone(1000, 0.5, sr), silence(1.0, sr)])
    (beep,) = listen(x, sr)
    assert beep.tone == "beep"
    assert beep.call_id == "call_1"
    assert beep.start == pytest.approx(T0 + 0.5, abs=0.03)
    assert beep.end == pytest.approx(T0 + 1.0, abs=0.03)
    assert beep.hz == pytest.approx((1000.0,), abs=5)


@pytest.mark.parametrize("sr", RATES)
async def test_a_beep_after_a_greeting_and_a_pause_is_published(sr: int) -> None:
    x = np.concatenate(
        [silence(0.3, sr), voice_like(1.5, sr), silence(0.4, sr), tone(1000, 0.5, sr)]
        + [silence(1.0, sr)]
    )
    (beep,) = listen(x, sr)
    assert beep.tone == "beep"
    assert beep.start == pytest.approx(T0 + 2.2, abs=0.03)
    assert beep.end == pytest.approx(T0 + 2.7, abs=0.03)


@pytest.mark.parametrize("sr", RATES)
async def test_a_greeting_alone_publishes_nothing(sr: int) -> None:
    assert listen(np.concatenate([voice_like(3.0, sr), silence(1.0, sr)]), sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_ringback_is_published_as_ringback_never_as_a_beep(sr: int) -> None:
    ring = tone((440, 480), 2.0, sr)
    x = np.concatenate([silence(0.5, sr), ring, silence(4.0, sr), ring, silence(1.0, sr)])
    published = listen(x, sr)
    assert [m.tone for m in published] == ["ringback", "ringback"]
    assert published[0].start == pytest.approx(T0 + 0.5, abs=0.05)
    assert published[0].end == pytest.approx(T0 + 2.5, abs=0.05)


@pytest.mark.parametrize("sr", RATES)
async def test_a_short_burst_of_ringback_is_not_a_beep(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), tone((440, 480), 0.8, sr), silence(1.0, sr)])
    assert [m.tone for m in listen(x, sr)] == ["ringback"]


@pytest.mark.parametrize("sr", RATES)
async def test_the_british_double_ring_is_ringback(sr: int) -> None:
    burst = tone((400, 450), 0.4, sr)
    ring = [burst, silence(0.2, sr), burst, silence(2.0, sr)]
    x = np.concatenate([silence(0.5, sr), *ring])
    assert [m.tone for m in listen(x, sr)] == ["ringback", "ringback"]


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("pair", [(480, 620), (350, 440)])
async def test_busy_and_dial_tones_are_neither_beeps_nor_ringback(
    sr: int, pair: tuple[float, float]
) -> None:
    x = np.concatenate([silence(0.5, sr), tone(pair, 0.5, sr), silence(1.0, sr)])
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_a_blip_of_a_ringback_pair_is_not_ringback(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), tone((440, 480), 0.2, sr), silence(1.0, sr)])
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_a_run_of_short_notes_is_not_a_beep(sr: int) -> None:
    notes = [tone(hz, 0.3, sr) for hz in (440, 550, 660, 880)]
    x = np.concatenate([silence(0.5, sr), *notes, silence(1.0, sr)])
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_a_note_with_its_octave_is_not_a_beep(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), tone((440, 880), 0.5, sr), silence(1.0, sr)])
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("pair", [(390.5, 481.1), (426.2, 451.4), (322.7, 476.9), (296.3, 574.1)])
async def test_two_neighbouring_voice_harmonics_are_not_a_beep(
    sr: int, pair: tuple[float, float]
) -> None:
    # measured on synthetic speech: a held vowel whose 4th and 5th harmonics
    # carry the band (their ratio drifts off 5/4 with the pitch)
    x = np.concatenate([silence(0.5, sr), tone(pair, 0.3, sr), silence(1.0, sr)])
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_a_dual_tone_beep_that_is_not_call_progress_is_published(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), tone((440, 720), 0.5, sr), silence(1.0, sr)])
    (beep,) = listen(x, sr)
    assert beep.tone == "beep"
    assert beep.hz == pytest.approx((440.0, 720.0), abs=5)


@pytest.mark.parametrize("sr", RATES)
async def test_a_high_dual_beep_near_a_harmonic_ratio_is_still_a_beep(sr: int) -> None:
    # 950 + 1400 Hz is 1.47, close to 3/2; a voice's strong harmonics are lower
    x = np.concatenate([silence(0.5, sr), tone((950, 1400), 0.5, sr), silence(1.0, sr)])
    (beep,) = listen(x, sr)
    assert beep.hz == pytest.approx((950.0, 1400.0), abs=5)


@pytest.mark.parametrize("sr", RATES)
async def test_sit_tri_tone_is_published_as_sit_and_not_as_a_beep(sr: int) -> None:
    x = np.concatenate([silence(0.5, sr), sit_tone(sr), silence(1.0, sr)])
    published = listen(x, sr)
    assert [m.tone for m in published] == ["sit"]
    (sit,) = published
    assert sit.start == pytest.approx(T0 + 0.5, abs=0.03)
    assert sit.end == pytest.approx(T0 + 0.5 + 0.928, abs=0.03)
    assert sit.hz == pytest.approx((913.8, 1370.6, 1776.7), abs=10)


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize(("tone_ms", "gap_ms"), [(100, 60), (300, 400)])
async def test_dtmf_digits_are_not_beeps(sr: int, tone_ms: int, gap_ms: int) -> None:
    x = np.concatenate(
        [silence(0.5, sr), dtmf_tones("159#0", sr, tone_ms=tone_ms, gap_ms=gap_ms)]
        + [silence(1.0, sr)]
    )
    assert listen(x, sr) == []


@pytest.mark.parametrize("sr", RATES)
async def test_nothing_is_published_while_inactive(sr: int) -> None:
    x = np.concatenate(
        [silence(0.5, sr), tone(1000, 0.5, sr), silence(1.0, sr), sit_tone(sr), silence(1, sr)]
    )
    assert listen(x, sr, active=False) == []
    assert [m.tone for m in listen(x, sr)] == ["beep", "sit"]


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("under", ["offset", "rumble"])
def test_a_tone_over_a_dc_offset_or_a_rumble_is_read_at_its_own_frequency(
    sr: int, under: str
) -> None:
    """A run's frequencies are read in the band the tonal test looked at. At 0 Hz a
    line's DC offset (or a slow rumble) can be the strongest peak of the run's long
    FFT: that once raised out of the detector (a male voice's held 310 + 360 Hz over
    an offset of 0.005), and the tone detection took the call's audio down with it."""
    x = np.concatenate([silence(0.5, sr), 0.5 * tone(1000, 0.5, sr), silence(1.0, sr)])
    t = np.arange(x.size) / sr
    low = 0.2 if under == "offset" else 0.2 * np.cos(2 * np.pi * 2 * t)
    detector = BeepDetector(sr)
    n = round(0.02 * sr)
    y = (x + low).astype(np.float32)
    events = [e for i in range(0, y.size - n + 1, n) for e in detector.push(y[i : i + n], i / sr)]
    (beep,) = events
    assert beep.hz == pytest.approx((1000.0,), abs=5)
    assert beep.start == pytest.approx(0.5, abs=0.03)


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("amps", [(1.0, 1.0), (0.7, 1.0), (1.0, 1.0, 0.3)])
def test_a_held_vowel_whose_fundamental_is_below_the_beep_band_is_no_beep(
    sr: int, amps: tuple[float, ...]
) -> None:
    """The tonal test looks at 300-3,400 Hz, where a 208 Hz voice shows its 416 Hz
    harmonic; the run's frequency is read over the whole spectrum, so it is 208 Hz
    and too low for a beep. Read in the band alone it was a 416 Hz beep, and the
    real beep after "Leave it at the beep." was then ignored as a tone after a tone."""
    t = np.arange(round(0.4 * sr)) / sr
    vowel = sum(a * np.sin(2 * np.pi * 208 * (k + 1) * t) for k, a in enumerate(amps))
    x = np.concatenate([silence(0.3, sr), 0.1 * vowel / max(amps), silence(0.5, sr)])
    x = x.astype(np.float32)
    detector = BeepDetector(sr)
    n = round(0.02 * sr)
    assert [
        e for i in range(0, x.size - n + 1, n) for e in detector.push(x[i : i + n], i / sr)
    ] == []


async def test_a_fault_in_tone_detection_does_not_raise_into_the_audio_path() -> None:
    """The transport feeds frames from the session's audio task: a detector that raises
    loses its state and the frame, and the next beep is heard all the same."""
    sr = 8000
    published: list[AmdTone] = []
    listener = ToneListener(sr, AmdConfig(), published.append, "call_1")
    listener.active = True
    broken = listener.beeps

    def fault(*args: object) -> list[object]:
        raise ValueError("broken")

    broken.push = fault  # type: ignore[method-assign]
    n = round(0.02 * sr)
    x = np.concatenate([silence(0.5, sr), tone(1000, 0.5, sr), silence(1.0, sr)])
    listener.push(T0, x[:n])  # raises inside, not out
    assert listener.beeps is not broken
    for i in range(n, x.size - n + 1, n):
        listener.push(T0 + i / sr, x[i : i + n])
    (beep,) = published
    assert beep.tone == "beep" and beep.start == pytest.approx(T0 + 0.5, abs=0.03)


@pytest.mark.parametrize("sr", RATES)
async def test_a_tone_longer_than_any_beep_does_not_hold_a_decision(sr: int) -> None:
    """The AMD actor puts off settling a turn while a tone may prove to be a beep; a
    held note or a hum longer than ``beep_max_seconds`` cannot, so it stops doing so."""
    listener = ToneListener(sr, AmdConfig(), [].append, "call_1")
    listener.active = True
    n = round(0.02 * sr)
    x = np.concatenate([silence(0.3, sr), tone(1000, 3.0, sr)])
    active = {}
    for i in range(0, x.size - n + 1, n):
        listener.push(T0 + i / sr, x[i : i + n])
        active[round(i / sr, 2)] = listener.tone_active
    assert active[0.2] is False
    assert active[1.0] is True  # 0.7 s of tone: it may be a beep
    assert active[2.5] is False  # 2.2 s of it: no beep is that long
    assert listener.beeps.tone_seconds > AmdConfig().beep_max_seconds


def test_a_tones_frequency_is_read_within_half_a_bin_of_its_peak() -> None:
    """A second peak is picked with the first one's lobe cleared, so its neighbour may
    be louder than it: a parabola's vertex off that bin put a voice's "tone" at a
    negative bin whose region spanned the spectrum, and the run never ended."""
    tracker = BeepDetector(8000)._tracker
    lo = tracker._lo
    not_a_top = np.array([1.0, 5.0, 100.0, 1.0])  # bin 1 is below its right neighbour
    assert tracker._interp(not_a_top, 1) == pytest.approx(lo + 1)
    top = np.array([1.0, 100.0, 50.0, 1.0])
    assert lo + 1 < tracker._interp(top, 1) <= lo + 1.5


@pytest.mark.parametrize("sr", RATES)
async def test_a_vowel_read_as_a_tone_then_speech_does_not_put_off_the_beep(sr: int) -> None:
    """espeak-ng's "anika" voice held a vowel that read as a 296 + 574 Hz dual tone
    near the end of "... after the tone", and speech followed it. A tone followed by
    sound is taken for music, and tones are ignored for 1.5 s after it: the real beep
    1.1 s later was lost. The low octave, drifted by the voice's glide, is a voice's
    two harmonics, not a tone."""
    x = np.concatenate(
        [silence(0.3, sr), voice_like(1.0, sr), silence(0.1, sr), tone((296, 574), 0.2, sr)]
        + [voice_like(0.4, sr), silence(0.6, sr), tone(1000, 0.5, sr), silence(1.0, sr)]
    )
    (beep,) = listen(x, sr)
    assert beep.tone == "beep"
    assert beep.start == pytest.approx(T0 + 2.6, abs=0.03)
    assert beep.hz == pytest.approx((1000.0,), abs=5)
