"""The AMD actor decides a call the same way whenever on the loop's clock it starts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import numpy as np
import pytest

from agent.core.bus import Bus
from agent.core.clock import VirtualClockLoop
from agent.core.messages import (
    AmdPrediction,
    AmdTone,
    CallAnswered,
    TimerFired,
    UserSpeechStarted,
    UserSpeechStopped,
)
from agent.telephony.sim.tones import silence, tone
from amd.actor import AmdActor
from amd.config import AmdConfig
from amd.detector import ArmTimer

#: starts whose float error differs: 1.8 - 0.6 on their clocks is 1.2 or a hair off it
_STARTS = (0.0, 7.0, 10.0, 25.8, 1000.3, 86_400.7, 1_234_567.1)


def _run_from(origin: float, call: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``call`` on a virtual clock that starts at loop time ``origin``."""
    loop = VirtualClockLoop(start=origin)
    try:
        loop.run_until_complete(call())
    finally:
        loop.close()


async def _greeting(origin: float, deliver: Callable[[Any], Awaitable[Any]]) -> None:
    """The answer at ``origin``, then a greeting from 0.6 to 1.8 s after it."""
    loop = asyncio.get_running_loop()
    for after, msg in ((0.0, CallAnswered), (0.6, UserSpeechStarted), (1.8, UserSpeechStopped)):
        await asyncio.sleep(origin + after - loop.time())
        await deliver(msg(call_id="c1", at=loop.time()))


def _verdicts(origin: float, limit: float) -> list[tuple[str, str, float]]:
    """A 1.2 s greeting from 0.6 s after an answer at loop time ``origin``, with the
    timing rule's limit at ``limit``: what AMD predicts, and when after the answer."""
    seen: list[tuple[str, str, float]] = []

    async def call() -> None:
        bus = Bus("c1")
        amd = AmdActor(call_id="c1", bus=bus, config=AmdConfig(short_greeting_seconds=limit))

        def heard(msg: Any) -> None:
            assert isinstance(msg, AmdPrediction)
            seen.append((msg.category, msg.reason, round(msg.at - origin, 6)))

        bus.subscribe("amd_prediction", heard)
        running = asyncio.create_task(amd.run())
        await _greeting(origin, amd.tell)
        await asyncio.sleep(0.8)  # the person verdict is due 0.3 s after the greeting
        amd.stop()
        await running

    _run_from(origin, call)
    return seen


@pytest.mark.parametrize("origin", _STARTS)
def test_a_greeting_as_long_as_the_limit_is_short_whenever_the_call_starts(
    origin: float,
) -> None:
    """The limit is "at most": on loop time the same greeting was a person at one
    start and a hair too long at another, so a call replayed alone and after other
    calls was decided two ways."""
    ((category, reason, at),) = _verdicts(origin, 1.2)
    assert (category, at) == ("human", 2.1)  # 0.3 s of silence after the greeting
    assert reason.startswith("timing: 1.20 s greeting then silence")


@pytest.mark.parametrize("origin", _STARTS)
def test_a_greeting_over_the_limit_waits_for_its_words_whenever_the_call_starts(
    origin: float,
) -> None:
    assert _verdicts(origin, 1.19) == []


@pytest.mark.parametrize("origin", _STARTS)
def test_the_detector_reads_every_call_on_a_clock_from_its_first_event(
    origin: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every span the detector compares with a threshold (pauses, silences,
    monologues) is then the same number whenever the call started."""
    calls: list[tuple[str, tuple[float, ...]]] = []

    def spy(name: str) -> Any:
        def record(*times: float) -> list[Any]:
            calls.append((name, times))
            return []

        return record

    async def call() -> None:
        amd = AmdActor(call_id="c1", bus=Bus("c1"))
        for name in ("answered", "speech_started", "speech_stopped"):
            monkeypatch.setattr(amd.detector, name, spy(name))
        await _greeting(origin, amd.receive)

    _run_from(origin, call)
    assert calls == [
        ("answered", (0.0,)),
        ("speech_started", (0.6,)),
        ("speech_stopped", (1.8, 1.8)),
    ]


def _tones(origin: float) -> list[tuple[str, float, float]]:
    """A greeting's pause, a 0.5 s beep and a second of quiet, tapped in 20 ms frames
    from loop time ``origin``: the tones published, their times after the first frame."""
    seen: list[tuple[str, float, float]] = []

    def heard(msg: Any) -> None:
        assert isinstance(msg, AmdTone)
        seen.append((msg.tone, round(msg.start - origin, 6), round(msg.end - origin, 6)))

    async def call() -> None:
        bus = Bus("c1")
        bus.subscribe("amd_tone", heard)
        amd = AmdActor(call_id="c1", bus=bus, sample_rate=8000)
        audio = np.concatenate([silence(0.5, 8000), tone(1000, 0.5, 8000), silence(1.0, 8000)])
        loop = asyncio.get_running_loop()
        await amd.receive(CallAnswered(call_id="c1", at=loop.time()))
        for i in range(0, audio.size - 160 + 1, 160):
            amd.audio_tap(origin + i / 8000, audio[i : i + 160])

    _run_from(origin, call)
    return seen


def test_a_beep_is_heard_at_the_same_place_in_the_call_whenever_it_starts() -> None:
    """The tone listener compares its spans (a beep's length, the quiet after it) on
    the detector's clock too; its tones are published back on the loop's, at the
    same place in the call whatever the start."""
    first = _tones(0.0)
    assert [kind for kind, _, _ in first] == ["beep"]
    for origin in _STARTS[1:]:
        assert _tones(origin) == first, origin


def _timer_seen_at(
    origin: float, due: float, fired: float, monkeypatch: pytest.MonkeyPatch
) -> float:
    """The detector arms "settle" for ``due`` (seconds after the answer at loop time
    ``origin``); its message is handled at ``fired``: the time the detector is told."""
    told: list[float] = []

    async def call() -> None:
        amd = AmdActor(call_id="c1", bus=Bus("c1"))
        loop = asyncio.get_running_loop()
        await amd.receive(CallAnswered(call_id="c1", at=loop.time()))
        amd._apply([ArmTimer("settle", due)], turn_id=None)
        amd.cancel_timer("settle")  # delivered by hand below
        monkeypatch.setattr(amd.detector, "timer", lambda t, name: told.append(t) or [])
        await asyncio.sleep(origin + fired - loop.time())
        await amd.receive(TimerFired(call_id="c1", at=loop.time(), name="settle"))

    _run_from(origin, call)
    (t,) = told
    return t


@pytest.mark.parametrize("origin", _STARTS)
def test_a_timer_is_handled_at_the_time_the_detector_asked_for(
    origin: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2.1 after the answer is 2.1 to the float, not 2.0999995 rounded down
    assert _timer_seen_at(origin, 2.1, 2.1, monkeypatch) == 2.1


def test_a_timer_re_armed_after_it_fired_does_not_move_the_detector_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The message of a timer that fired can wait in the mailbox while the detector
    arms it again for later: it is handled at the time it came, not the new one."""
    assert _timer_seen_at(25.8, 2.4, 2.1, monkeypatch) == pytest.approx(2.1, abs=1e-6)
