"""Actors: tell and ask, urgent and data lanes, back-pressure, stop and interruption."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.core import Actor, ActorStopped, AskTimeout, CallScope, MailboxFull, run
from agent.core.messages import HangUp, InterruptRun, Say

CALL = "call_test"


def say(text: str) -> Say:
    return Say(call_id=CALL, text=text)


class Scripted(Actor):
    """Handles ``say`` by text: ``echo:x`` replies, ``fail`` raises, ``wait`` blocks on a gate.

    ``interrupt_run`` (urgent) interrupts the data lane; ``hang_up`` (urgent)
    opens the gate.
    """

    def __init__(self, name: str = "scripted", *, capacity: int = 256) -> None:
        super().__init__(name, capacity=capacity)
        self.gate = asyncio.Event()
        self.started: list[str] = []
        self.handled: list[str] = []
        self.starts = 0
        self.stops = 0

    async def on_start(self) -> None:
        self.starts += 1

    async def on_stop(self) -> None:
        self.stops += 1

    async def receive(self, msg: Any) -> Any:
        match msg:
            case Say(text=text):
                self.started.append(text)
                if text.startswith("wait"):
                    await self.gate.wait()
                elif text.startswith("sleep"):
                    await asyncio.sleep(float(text.split(":")[1]))
                elif text == "fail":
                    raise ValueError("scripted failure")
                elif text == "timeout":
                    raise TimeoutError("database timed out")
                self.handled.append(text)
                return text.removeprefix("echo:")
            case InterruptRun():
                return self.interrupt_data()
            case HangUp():
                self.gate.set()
                return "opened"
        raise AssertionError(f"unexpected {msg!r}")


async def _settle() -> None:
    """Let every ready task run until the loop is idle (virtual time only)."""
    await asyncio.sleep(0.001)


def test_ask_returns_the_reply() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        assert await actor.ask(say("echo:hello"), timeout=1) == "hello"
        assert await actor.ask(HangUp(call_id=CALL), timeout=1) == "opened"
        actor.stop()
        await task  # a clean stop: run() returns without raising

    run(main())


def test_failure_in_ask_goes_to_the_asker_and_the_actor_keeps_serving() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        with pytest.raises(ValueError, match="scripted failure"):
            await actor.ask(say("fail"), timeout=1)
        assert await actor.ask(say("echo:still here"), timeout=1) == "still here"
        assert not task.done()
        assert actor.starts == 1
        actor.stop()
        await task

    run(main())


def test_timeout_error_raised_by_the_handler_is_not_reported_as_ask_timeout() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        with pytest.raises(TimeoutError, match="database timed out") as err:
            await actor.ask(say("timeout"), timeout=5)
        assert not isinstance(err.value, AskTimeout)
        actor.stop()
        await task

    run(main())


def test_failure_in_tell_crashes_run() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        await actor.tell(say("fail"))
        with pytest.raises(ValueError, match="scripted failure"):
            await asyncio.wait_for(task, timeout=5)

    run(main())


def test_urgent_message_is_handled_while_a_data_handler_runs() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        # The data handler waits for the gate that only the urgent handler opens:
        # if urgent messages queued behind data, this would deadlock.
        waiting = asyncio.create_task(actor.ask(say("wait"), timeout=60))
        await _settle()
        assert actor.started == ["wait"] and actor.handled == []
        await actor.tell(HangUp(call_id=CALL))
        assert await asyncio.wait_for(waiting, timeout=5) == "wait"
        actor.stop()
        await task

    run(main())


def test_full_data_lane_applies_back_pressure() -> None:
    async def main() -> None:
        actor = Scripted("pressured", capacity=2)
        task = asyncio.create_task(actor.run())
        await actor.tell(say("wait"))
        await _settle()  # the handler took "wait" and blocks; the lane is empty
        await actor.tell(say("a"))
        actor.tell_nowait(say("b"))
        with pytest.raises(MailboxFull, match="'pressured'.*'say'"):
            actor.tell_nowait(say("c"))
        blocked = asyncio.create_task(actor.tell(say("d")))
        await asyncio.sleep(10)
        assert not blocked.done()
        # The urgent lane is never blocked by a full data lane.
        actor.tell_nowait(HangUp(call_id=CALL))
        await asyncio.wait_for(blocked, timeout=5)
        assert await actor.ask(say("echo:e"), timeout=5) == "e"
        assert actor.handled == ["wait", "a", "b", "d", "echo:e"]
        actor.stop()
        await task

    run(main())


def test_ask_times_out_with_ask_timeout_and_the_actor_skips_the_stale_ask() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        actor = Scripted("slow")
        task = asyncio.create_task(actor.run())
        await actor.tell(say("wait"))
        t0 = loop.time()
        with pytest.raises(AskTimeout, match="'slow'.*'say'") as err:
            await actor.ask(say("echo:late"), timeout=1.5)
        assert isinstance(err.value, TimeoutError)
        assert loop.time() - t0 == pytest.approx(1.5)
        await actor.tell(HangUp(call_id=CALL))
        assert await actor.ask(say("echo:next"), timeout=1) == "next"
        assert "echo:late" not in actor.started  # the asker gave up; nobody handles it
        actor.stop()
        await task

    run(main())


def test_ask_timeout_covers_waiting_for_room_in_a_full_data_lane() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        actor = Scripted("jammed", capacity=1)
        task = asyncio.create_task(actor.run())
        await actor.tell(say("wait"))
        await _settle()
        await actor.tell(say("queued"))  # the lane is now full
        t0 = loop.time()
        with pytest.raises(AskTimeout):
            await asyncio.wait_for(actor.ask(say("echo:x"), timeout=2), timeout=60)
        assert loop.time() - t0 == pytest.approx(2.0)
        actor.gate.set()
        actor.stop()
        await task

    run(main())


def test_stop_finishes_the_current_message_and_fails_queued_asks() -> None:
    async def main() -> None:
        actor = Scripted("worker")
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            current = asyncio.create_task(actor.ask(say("sleep:1"), timeout=60))
            await _settle()
            queued = [asyncio.create_task(actor.ask(say(f"q{i}"), timeout=60)) for i in range(3)]
            await _settle()
            actor.stop()
            # The message being handled finishes and is answered.
            assert await current == "sleep:1"
            for pending in queued:
                with pytest.raises(ActorStopped, match="'worker'"):
                    await pending
        assert actor.started == ["sleep:1"]
        assert actor.stops == 1

    run(main())


def test_ask_and_tell_on_a_stopped_actor_fail_at_once() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        actor = Scripted("gone")
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await _settle()
            await scope.shutdown()
        t0 = loop.time()
        with pytest.raises(ActorStopped, match="'gone'"):
            await actor.ask(say("echo:x"), timeout=60)
        with pytest.raises(ActorStopped, match="'gone'"):
            await actor.tell(say("x"))
        with pytest.raises(ActorStopped, match="'gone'"):
            actor.tell_nowait(HangUp(call_id=CALL))
        assert loop.time() == t0
        assert actor.stopped

    run(main())


def test_asks_cut_off_by_a_hard_cancel_fail_with_actor_stopped() -> None:
    async def main() -> None:
        actor = Scripted("stuck")
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            stuck = asyncio.create_task(actor.ask(say("wait"), timeout=60))
            await _settle()
            await scope.shutdown(grace=1)
            with pytest.raises(ActorStopped, match="'stuck'"):
                await asyncio.wait_for(stuck, timeout=5)

    run(main())


def test_interrupt_data_cancels_the_handler_and_drops_queued_data() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        await actor.tell(say("wait"))
        await _settle()
        for text in ("stale-1", "stale-2"):
            await actor.tell(say(text))
        stale_ask = asyncio.create_task(actor.ask(say("stale-3"), timeout=60))
        await _settle()
        dropped = await actor.ask(InterruptRun(call_id=CALL, run_id="run_1"), timeout=1)
        assert dropped == 3
        # A dropped ask does not hang: it is cancelled.
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(stale_ask, timeout=5)
        # The actor goes on with new data.
        assert await actor.ask(say("echo:fresh"), timeout=1) == "fresh"
        assert actor.started == ["wait", "echo:fresh"]
        assert actor.handled == ["echo:fresh"]
        assert not task.done() and actor.starts == 1
        actor.stop()
        await task

    run(main())


def test_interrupt_data_answers_an_in_flight_ask_by_cancelling_it() -> None:
    async def main() -> None:
        actor = Scripted()
        task = asyncio.create_task(actor.run())
        in_flight = asyncio.create_task(actor.ask(say("sleep:100"), timeout=600))
        await _settle()
        assert await actor.ask(InterruptRun(call_id=CALL, run_id="run_1"), timeout=1) == 0
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(in_flight, timeout=5)
        assert actor.handled == []
        assert await actor.ask(say("echo:ok"), timeout=1) == "ok"
        actor.stop()
        await task

    run(main())


async def test_actor_works_on_a_real_loop() -> None:
    actor = Scripted()
    task = asyncio.create_task(actor.run())
    assert await actor.ask(say("echo:real"), timeout=5) == "real"
    actor.stop()
    await task


def test_the_urgent_lane_is_chosen_by_the_message_class() -> None:
    from agent.core.actor import Actor
    from agent.core.messages import URGENT_KINDS, CallEnded, HangUp, UserTranscript

    assert HangUp.urgent and CallEnded.urgent and not UserTranscript.urgent
    assert {"hang_up", "call_ended", "interrupt_run", "transfer", "remote_hangup"} == URGENT_KINDS
    assert Actor._is_urgent(HangUp(call_id="c"))
    assert not Actor._is_urgent(UserTranscript(call_id="c", turn_id="t", text="hi", final=True))
    assert not Actor._is_urgent(object())
