"""Acoustic AMD evidence: beeps, SIT and greeting timing on line-degraded audio."""

from __future__ import annotations

import time

import numpy as np
import pytest

from agent.models.piper_tts import synthesize_pcm
from agent.telephony.audio import from_int16
from agent.telephony.line import LineModel
from agent.telephony.sim.tones import dtmf_tones, silence, sit_tone, tone
from amd.acoustic import (
    BeepDetector,
    GreetingFeatures,
    GreetingTimer,
    SitDetector,
    TimingConfig,
    short_greeting_then_silence,
    timing_verdict,
)
from amd.actor import ToneListener
from amd.config import AmdConfig

SR = 16000
FRAME = 320  # 20 ms
LINE = LineModel(sample_rate=8000, codec="pcmu", noise_db=-45)


def on_line(*parts: np.ndarray) -> np.ndarray:
    return LINE.apply(np.concatenate(parts), SR)


def feed(detector: BeepDetector | SitDetector, x: np.ndarray) -> list:
    events = []
    for i in range(0, x.size, FRAME):
        events += detector.push(x[i : i + FRAME], i / SR)
    return events


def greeting(x: np.ndarray) -> GreetingFeatures:
    timer = GreetingTimer(SR)
    features = timer.features
    for i in range(0, x.size, FRAME):
        features = timer.push(x[i : i + FRAME])
    return features


@pytest.fixture(scope="module")
def speech() -> dict[str, np.ndarray]:
    texts = {
        "vm": "Hi, you've reached Dana. Leave a message after the tone.",
        "hello": "Hello?",
        "long": "Hi, you've reached the Millers. We can't come to the phone right now. "
        "Please leave your name and number and we will call you back.",
    }
    # seeded: an unseeded render differs from run to run, and about one in thirty
    # holds a vowel whose two harmonics the raw BeepDetector reports as a dual tone
    # (331 + 442 Hz for 0.19 s was seen); AMD's ToneListener rejects those, the raw
    # detector's edge test below would not
    return {k: from_int16(synthesize_pcm(t, SR, seed=1)) for k, t in texts.items()}


def test_beep_after_silence_is_detected_with_its_edges() -> None:
    events = feed(
        BeepDetector(SR), on_line(silence(0.5, SR), tone(1000, 0.6, SR), silence(0.5, SR))
    )
    assert len(events) == 1
    (beep,) = events
    assert abs(beep.start - 0.5) <= 0.04
    assert abs(beep.end - 1.1) <= 0.04
    assert beep.hz == pytest.approx((1000.0,), abs=5)
    assert not beep.dual


@pytest.mark.parametrize("pair", [(440.0, 480.0), (350.0, 440.0)])
def test_dual_tone_beep_is_reported_as_dual(pair: tuple[float, float]) -> None:
    x = on_line(silence(0.5, SR), tone(pair, 0.6, SR), silence(0.5, SR))
    (beep,) = feed(BeepDetector(SR), x)
    assert beep.dual
    assert beep.hz == pytest.approx(pair, abs=5)
    assert abs(beep.end - 1.1) <= 0.04


def test_beep_shorter_than_150_ms_is_ignored() -> None:
    x = on_line(silence(0.5, SR), tone(1000, 0.1, SR), silence(0.5, SR))
    assert feed(BeepDetector(SR), x) == []


@pytest.mark.parametrize("seconds", [0.06, 0.1])
def test_short_tone_that_runs_into_other_harmonics_is_not_a_beep(seconds: float) -> None:
    # a held vowel's harmonic: pure for a few windows, then the voice's other
    # harmonics join it at the same level; the tone's end is not drawn past
    # the windows that heard it (it was, to 0.8 s, and 0.06 s made a beep)
    t = np.arange(int((seconds + 0.12) * SR)) / SR
    x = 0.25 * np.sin(2 * np.pi * 528.0 * t)
    later = t >= seconds
    x[later] += 0.125 * (
        np.sin(2 * np.pi * 800.0 * t[later]) + np.sin(2 * np.pi * 1338.0 * t[later])
    )
    x[-80:] *= np.linspace(1.0, 0.0, 80)
    assert (
        feed(BeepDetector(SR), on_line(silence(0.5, SR), x.astype(np.float32), silence(0.5, SR)))
        == []
    )


def test_dtmf_digits_are_not_beeps() -> None:
    x = on_line(silence(0.5, SR), dtmf_tones("123", SR), silence(0.5, SR))
    assert feed(BeepDetector(SR), x) == []


def test_held_dtmf_pair_is_not_a_beep() -> None:
    x = on_line(silence(0.5, SR), tone((697.0, 1209.0), 0.4, SR), silence(0.5, SR))
    assert feed(BeepDetector(SR), x) == []


def test_line_noise_is_not_a_beep() -> None:
    assert feed(BeepDetector(SR), on_line(silence(3.0, SR))) == []


def test_speech_is_not_a_beep_but_the_beep_after_it_is(speech: dict[str, np.ndarray]) -> None:
    vm = speech["vm"]
    beep_start = 0.3 + vm.size / SR + 0.3
    x = on_line(silence(0.3, SR), vm, silence(0.3, SR), tone(1000, 0.5, SR), silence(0.5, SR))
    (beep,) = feed(BeepDetector(SR), x)
    assert abs(beep.start - beep_start) <= 0.04
    assert abs(beep.end - (beep_start + 0.5)) <= 0.04


async def test_speech_alone_fires_nothing(speech: dict[str, np.ndarray]) -> None:
    # the raw BeepDetector may report two neighbouring harmonics of a held vowel
    # (357 + 430 Hz was seen); AMD's ToneListener rejects those: what it publishes
    # on speech must be nothing
    n = round(0.02 * SR)
    for audio in speech.values():
        x = on_line(audio, silence(0.3, SR))
        assert feed(SitDetector(SR), x) == []
        published: list[object] = []
        listener = ToneListener(SR, AmdConfig(), published.append, "call_1")
        listener.active = True
        for i in range(0, x.size - n + 1, n):
            listener.push(i / SR, x[i : i + n])
        assert published == []


def test_frame_size_and_rate_do_not_matter() -> None:
    x = LINE.apply(np.concatenate([silence(0.5, 8000), tone(1000, 0.6, 8000)]), 8000)
    det = BeepDetector(8000)
    events = det.push(x[:1234], 0.0) + det.push(x[1234:], 1234 / 8000)
    events += det.push(np.zeros(4000, dtype=np.float32))
    (beep,) = events
    assert abs(beep.end - 1.1) <= 0.04


def test_sit_tri_tone_is_detected() -> None:
    x = on_line(silence(0.5, SR), sit_tone(SR), silence(0.5, SR))
    (sit,) = feed(SitDetector(SR), x)
    assert abs(sit.start - 0.5) <= 0.04
    assert abs(sit.end - 1.428) <= 0.04
    assert sit.hz == pytest.approx((913.8, 1370.6, 1776.7), abs=5)


def test_sit_tolerates_variant_timing() -> None:
    segments = [(913.8, 0.38), (1370.6, 0.274), (1776.7, 0.3)]
    x = on_line(silence(0.3, SR), *[tone(f, s, SR) for f, s in segments], silence(0.5, SR))
    assert len(feed(SitDetector(SR), x)) == 1


@pytest.mark.parametrize("hz", [913.8, 1370.6, 1776.7, 1000.0])
def test_single_tones_are_not_sit(hz: float) -> None:
    x = on_line(silence(0.3, SR), tone(hz, 0.9, SR), silence(0.5, SR))
    assert feed(SitDetector(SR), x) == []


def test_hello_then_silence_is_a_short_greeting_human(speech: dict[str, np.ndarray]) -> None:
    f = greeting(on_line(silence(0.4, SR), speech["hello"], silence(1.0, SR)))
    assert 1 <= f.words <= 3
    assert 0.3 <= f.initial_silence <= 0.7
    assert short_greeting_then_silence(f)
    assert timing_verdict(f) == ("human", "after_greeting_silence")


def test_long_voicemail_greeting_is_a_machine(speech: dict[str, np.ndarray]) -> None:
    f = greeting(on_line(silence(0.4, SR), speech["long"], silence(1.0, SR)))
    assert f.words >= 4
    assert f.greeting_seconds > 1.5
    assert not short_greeting_then_silence(f)
    verdict, reason = timing_verdict(f)
    assert verdict == "machine"
    assert reason in {"max_words", "long_greeting"}


def test_long_initial_silence_is_a_machine() -> None:
    f = greeting(on_line(silence(3.0, SR)))
    assert f.words == 0
    assert timing_verdict(f) == ("machine", "initial_silence")


def test_verdict_uses_configured_thresholds() -> None:
    f = GreetingFeatures(elapsed=1.2, initial_silence=1.0, words=0)
    assert timing_verdict(f) == ("uncertain", "undecided")
    assert timing_verdict(f, TimingConfig(initial_silence=0.8))[0] == "machine"
    talk = GreetingFeatures(elapsed=6.0, initial_silence=0.2, words=2, voice_seconds=1.0)
    assert timing_verdict(talk) == ("uncertain", "timeout")
    assert timing_verdict(talk, TimingConfig(greeting=0.9)) == ("machine", "long_greeting")


def test_short_greeting_rule_needs_enough_silence() -> None:
    f = GreetingFeatures(elapsed=1.5, words=1, greeting_seconds=0.5, trailing_silence=0.5)
    assert not short_greeting_then_silence(f)
    assert short_greeting_then_silence(f, min_silence=0.4)


def test_beep_detector_is_cheap_per_frame() -> None:
    x = on_line(*([silence(0.3, SR), tone(1000, 0.5, SR), silence(0.2, SR)] * 5))
    frames = [x[i : i + FRAME] for i in range(0, x.size, FRAME)]
    det = BeepDetector(SR)
    start = time.process_time()
    for i, frame in enumerate(frames):
        det.push(frame, i * 0.02)
    per_frame = (time.process_time() - start) / len(frames)
    assert per_frame < 1e-3
