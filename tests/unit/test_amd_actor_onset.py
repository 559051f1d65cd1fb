"""A decision that falls due as the callee starts talking again waits for the VAD's report.

The VAD reports a start about a tenth of a second after the voice began. A welcome,
a short pause and then a menu put the menu's first words inside that lag just as the
detector's settle timer gave its person on the welcome; which came first was up to
the threads that ran the models, so the same call was a menu in one run and a person
in the next. The actor now reads the onset from the frames it taps for tones.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from agent.core.bus import Bus
from agent.core.clock import VirtualClockLoop
from agent.core.messages import (
    AmdPrediction,
    CallAnswered,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTranscript,
)
from amd.actor import AmdActor, ToneListener
from amd.config import AmdConfig

RATE = 8000
FRAME = 160  # 20 ms

#: a welcome that leans machine without deciding it: a person is given on it once
#: the long-greeting silence (1.0 s) has passed after its end, at 3.6 s
WELCOME = "Thank you for calling Lighthouse Insurance."


def _noise(samples: int, dbfs: float, seed: int) -> np.ndarray:
    rms = 10 ** (dbfs / 20)
    return np.random.default_rng(seed).normal(0.0, rms, samples).astype(np.float32)


def _audio(pieces: list[tuple[float, float, float]], floor_db: float | None) -> np.ndarray:
    """5 s of callee audio: the line's floor, with ``(start, end, dBFS)`` sounds on it."""
    if floor_db is None:
        out = np.zeros(5 * RATE, dtype=np.float32)
    else:
        out = _noise(5 * RATE, floor_db, 1)
    for n, (start, end, db) in enumerate(pieces):
        a, b = int(start * RATE), int(end * RATE)
        out[a:b] += _noise(b - a, db, 10 + n)
    return out


def _predictions(
    then: list[tuple[float, float, float]],
    vad_start: float | None,
    config: AmdConfig | None = None,
    floor_db: float | None = None,
) -> list[tuple[str, float]]:
    """A 2 s welcome from 0.6 s (its VAD start at 0.6, its end reported at 2.9), its
    transcript at 2.95, then the sounds ``then``; the VAD reports a new start at
    ``vad_start`` (None: never). What AMD predicts up to 4.5 s, and when."""
    seen: list[tuple[str, float]] = []
    audio = _audio([(0.6, 2.6, -20.0), *then], floor_db)

    async def call() -> None:
        loop = asyncio.get_running_loop()
        bus = Bus("c1")
        amd = AmdActor(
            call_id="c1", bus=bus, config=config, speech_end_offset=0.3, sample_rate=RATE
        )
        bus.subscribe(
            "amd_prediction",
            lambda m: (
                seen.append((m.category, round(m.at, 3))) if isinstance(m, AmdPrediction) else None
            ),
        )
        running = asyncio.create_task(amd.run())

        async def frames() -> None:
            for i in range(0, audio.size - FRAME + 1, FRAME):
                await asyncio.sleep(i / RATE - loop.time())
                amd.audio_tap(loop.time(), audio[i : i + FRAME])

        events: list[tuple[float, Any]] = [
            (0.0, CallAnswered(call_id="c1", at=0.0)),
            (0.6, UserSpeechStarted(call_id="c1", at=0.6)),
            (2.9, UserSpeechStopped(call_id="c1", at=2.9)),
            (2.95, UserTranscript(call_id="c1", at=2.95, turn_id="t1", text=WELCOME, final=True)),
        ]
        if vad_start is not None:
            events.append((vad_start, UserSpeechStarted(call_id="c1", at=vad_start)))
        tapping = asyncio.create_task(frames())
        for at, msg in events:
            await asyncio.sleep(at - loop.time())
            await amd.tell(msg)
        await asyncio.sleep(4.5 - loop.time())
        amd.stop()
        await running
        tapping.cancel()

    loop = VirtualClockLoop(start=0.0)
    try:
        loop.run_until_complete(call())
    finally:
        loop.close()
    return seen


def test_without_a_new_sound_the_welcome_gets_its_person_when_the_silence_has_passed() -> None:
    assert _predictions([], None) == [("human", 3.6)]


def test_words_begun_before_the_decision_but_reported_after_it_come_first() -> None:
    """The menu starts at 3.5 s; the VAD says so at 3.63 s, after the settle (3.6 s)."""
    assert _predictions([(3.5, 5.0, -20.0)], 3.63) == []


def test_the_same_on_a_line_with_a_noise_floor() -> None:
    assert _predictions([(3.5, 5.0, -20.0)], 3.63, floor_db=-45.0) == []


def test_a_sound_the_vad_never_calls_speech_holds_the_decision_at_most_onset_hold() -> None:
    assert _predictions([(3.5, 5.0, -20.0)], None) == [("human", 3.8)]
    held = _predictions([(3.5, 5.0, -20.0)], None, AmdConfig(onset_hold=0.2))
    assert held == [("human", 3.7)]


def test_a_click_does_not_hold_the_decision() -> None:
    assert _predictions([(3.5, 3.52, -20.0)], None) == [("human", 3.6)]


def test_a_sound_that_stops_lets_the_decision_go() -> None:
    """A cough from 3.5 to 3.65 s: the decision waits while it lasts, not the whole hold."""
    ((category, at),) = _predictions([(3.5, 3.65, -20.0)], None)
    assert category == "human" and 3.65 <= at <= 3.7


def test_onset_hold_0_decides_at_once() -> None:
    got = _predictions([(3.5, 5.0, -20.0)], 3.63, AmdConfig(onset_hold=0.0))
    assert got == [("human", 3.6)]


def _listener(audio: np.ndarray) -> ToneListener:
    tones = ToneListener(RATE, AmdConfig(), lambda tone: None, "c1")
    tones.active = True
    for i in range(0, audio.size - FRAME + 1, FRAME):
        tones.push(i / RATE, audio[i : i + FRAME])
    return tones


@pytest.mark.parametrize("floor_db", [None, -60.0, -45.0])
def test_the_onset_is_the_first_loud_frame_after_the_pause(floor_db: float | None) -> None:
    tones = _listener(_audio([(0.6, 2.6, -20.0), (3.5, 5.0, -25.0)], floor_db))
    assert tones.sound_onset(3.6, after=2.6) == pytest.approx(3.5)


def test_sound_that_was_there_before_the_pause_has_no_onset() -> None:
    """A hum the VAD let go: loud since the callee's words ended, no pause, no onset."""
    tones = _listener(_audio([(0.6, 5.0, -20.0)], None))
    assert tones.sound_onset(3.6, after=2.6) is None


def test_a_quiet_line_has_no_onset() -> None:
    tones = _listener(_audio([(0.6, 2.6, -20.0)], -45.0))
    assert tones.sound_onset(3.6, after=2.6) is None
