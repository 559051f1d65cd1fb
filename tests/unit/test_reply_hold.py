"""A reply's first audio waits while the callee speaks; the call's opening waits for a pause.

``CallAgent._wait_for_callee_pause`` on the virtual clock, with a stand-in for the
session's VAD state (``user_state`` and its change events) and the session actor's
"seconds since the callee stopped".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from livekit.agents.voice.agent_activity import _SpeechHandleContextVar

from agent.core import clock
from agent.session.agent import MAX_FIRST_AUDIO_HOLD, CallAgent, SessionHooks


@dataclass
class _StateChanged:
    new_state: str


class _Vad:
    """The session as the hold sees it: the callee's VAD state and its events."""

    def __init__(self) -> None:
        self.user_state = "listening"
        self.stopped_at: float | None = None
        self._listeners: list[Callable[[Any], None]] = []

    def on(self, _event: str, fn: Callable[[Any], None]) -> None:
        self._listeners.append(fn)

    def off(self, _event: str, fn: Callable[[Any], None]) -> None:
        self._listeners.remove(fn)

    def speak(self) -> None:
        self.user_state = "speaking"
        self.stopped_at = None
        for fn in list(self._listeners):
            fn(_StateChanged("speaking"))

    def stop(self) -> None:
        self.user_state = "listening"
        self.stopped_at = asyncio.get_running_loop().time()
        for fn in list(self._listeners):
            fn(_StateChanged("listening"))

    def quiet_for(self) -> float | None:
        if self.stopped_at is None:
            return None
        return asyncio.get_running_loop().time() - self.stopped_at


@dataclass
class _Handle:
    id: str
    allow_interruptions: bool


def _agent(vad: _Vad, wait: float = 0.5) -> CallAgent:
    agent = CallAgent(
        instructions="Be brief.",
        hooks=SessionHooks(),
        publish=lambda msg: None,
        call_id="call-1",
        quiet_for=vad.quiet_for,
        quiet_before_reply=wait,
    )
    agent._session_or_none = lambda: vad  # type: ignore[method-assign]
    return agent


async def _hold(agent: CallAgent, handle: _Handle | None) -> float:
    """Seconds the hold of ``handle``'s first audio took (inside a running loop)."""
    loop = asyncio.get_running_loop()
    token = _SpeechHandleContextVar.set(handle)  # type: ignore[arg-type]
    try:
        started = loop.time()
        await agent._wait_for_callee_pause()
        return loop.time() - started
    finally:
        _SpeechHandleContextVar.reset(token)


def _opening(agent: CallAgent, *, protected: bool = False) -> _Handle:
    handle = _Handle("speech_opening", allow_interruptions=not protected)
    agent.openings.add(handle.id)
    return handle


def test_a_callee_who_never_spoke_does_not_hold_the_opening() -> None:
    vad = _Vad()
    agent = _agent(vad)
    assert clock.run(_hold(agent, _opening(agent)), virtual=True) == 0.0


def test_an_opening_ready_just_after_the_callee_stopped_waits_for_the_rest_of_the_pause() -> None:
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.stopped_at = asyncio.get_running_loop().time() - 0.2
        return await _hold(agent, _opening(agent))

    assert clock.run(main(), virtual=True) == pytest.approx(0.3, abs=0.01)


def test_a_reply_to_a_turn_is_not_held_in_a_pause() -> None:
    """The endpointing ended that turn: its reply is not held for a pause as well."""
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.stopped_at = asyncio.get_running_loop().time() - 0.1
        return await _hold(agent, _Handle("speech_reply", allow_interruptions=True))

    assert clock.run(main(), virtual=True) == 0.0


def test_a_reply_ready_while_the_callee_speaks_waits_for_them_to_stop() -> None:
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.speak()

        async def callee() -> None:
            await asyncio.sleep(0.4)
            vad.stop()

        task = asyncio.ensure_future(callee())
        held = await _hold(agent, _Handle("speech_reply", allow_interruptions=True))
        await task
        return held

    assert clock.run(main(), virtual=True) == pytest.approx(0.4, abs=0.01)


def test_a_callee_who_goes_on_after_a_short_pause_holds_the_opening_until_they_pause_again() -> (
    None
):
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.stopped_at = asyncio.get_running_loop().time()  # "Hello? Yeah," just ended

        async def callee() -> None:
            await asyncio.sleep(0.3)
            vad.speak()  # "sorry, I just walked in"
            await asyncio.sleep(1.0)
            vad.stop()

        task = asyncio.ensure_future(callee())
        # new speech has made the opening interruptible (SessionActor._unprotect)
        held = await _hold(agent, _opening(agent))
        await task
        return held

    # 0.3 s of pause, 1.0 s of speech, then the 0.5 s pause a turn needs
    assert clock.run(main(), virtual=True) == pytest.approx(1.8, abs=0.02)


def test_the_hold_is_bounded() -> None:
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.speak()  # and never stops
        return await _hold(agent, _opening(agent))

    assert clock.run(main(), virtual=True) == pytest.approx(MAX_FIRST_AUDIO_HOLD, abs=0.01)


@pytest.mark.parametrize(("opening", "held"), [(False, 0.0), (True, 0.4)])
def test_a_reply_that_cannot_be_interrupted_waits_for_a_pause_only_if_it_opens_the_call(
    opening: bool, held: float
) -> None:
    vad = _Vad()
    agent = _agent(vad, wait=0.5)
    handle = (
        _opening(agent, protected=True)
        if opening
        else _Handle("speech_voicemail", allow_interruptions=False)
    )

    async def main() -> float:
        vad.stopped_at = asyncio.get_running_loop().time() - 0.1
        return await _hold(agent, handle)

    assert clock.run(main(), virtual=True) == pytest.approx(held, abs=0.01)


def test_a_protected_opening_is_not_held_over_speech() -> None:
    """livekit's rule for a reply that cannot be interrupted: it plays."""
    vad = _Vad()
    agent = _agent(vad, wait=0.5)

    async def main() -> float:
        vad.speak()
        return await _hold(agent, _opening(agent, protected=True))

    assert clock.run(main(), virtual=True) == 0.0


def test_the_wait_is_the_endpointing_pause_left_after_the_vads_end_of_speech() -> None:
    from agent.app.call import QUIET_SLACK, _quiet_before_reply
    from agent.app.config import AgentConfig

    config = AgentConfig()
    turn = config.turn
    expected = turn.min_endpointing_delay - turn.vad_min_silence - QUIET_SLACK
    assert _quiet_before_reply("vad", config) == pytest.approx(expected)
    assert expected > 0
    # text-only replays and chats have no VAD: nothing to wait for
    assert _quiet_before_reply("stt", config) == 0.0


def test_a_hold_ending_a_hair_short_of_the_pause_does_not_spin() -> None:
    """Far into a call the clock reads tens of seconds: a sleep of 1e-15 s cannot move it."""
    vad = _Vad()
    asked = 0

    def quiet_for() -> float:
        nonlocal asked
        asked += 1
        if asked > 100:
            raise AssertionError("the hold spins")
        return 0.5 - 1e-15  # what the clock says, unmoved by the hold's last sleep

    agent = _agent(vad, wait=0.5)
    agent._quiet_for = quiet_for

    async def main() -> float:
        await asyncio.sleep(38.47)
        return await _hold(agent, _opening(agent))

    assert clock.run(main(), virtual=True) == 0.0
