"""Timers and tasks owned by the actor kernel: never lost to a full lane, gone on restart."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agent.controller.actor import CallControllerActor
from agent.controller.fsm import ControllerPolicy
from agent.core import Actor, Bus, CallScope, RestartBudget, run
from agent.core.messages import (
    CallAnswered,
    CallEnded,
    GenerateReply,
    HangUp,
    Say,
    TimerFired,
    UserSpeechStarted,
)

CALL = "call_timers"


def say(text: str) -> Say:
    return Say(call_id=CALL, text=text)


class Timed(Actor):
    """Arms timers and owns tasks on command; records what it handled and when."""

    def __init__(self, *, capacity: int = 256) -> None:
        super().__init__("timed", capacity=capacity)
        self.gate = asyncio.Event()
        self.handled: list[tuple[str, float]] = []
        self.restarts: list[Mapping[str, float]] = []
        self.task_cancelled = 0
        self.urgent_timer = False

    def timer_message(self, name: str, at: float) -> Any:
        if self.urgent_timer:
            return HangUp(call_id=CALL, at=at, reason=f"timer {name}")
        return TimerFired(call_id=CALL, at=at, name=name)

    async def on_restart(self, error: BaseException, timers: Mapping[str, float]) -> None:
        self.restarts.append(dict(timers))

    async def _forever(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.task_cancelled += 1
            raise

    async def _fail_later(self) -> None:
        await asyncio.sleep(1.0)
        raise RuntimeError("owned task failed")

    async def receive(self, msg: Any) -> Any:
        now = asyncio.get_running_loop().time()
        match msg:
            case TimerFired(name=name):
                self.handled.append((f"timer:{name}", now))
            case HangUp(reason=reason):
                self.handled.append((f"urgent:{reason}", now))
            case Say(text="wait"):
                await self.gate.wait()
                self.handled.append(("wait", now))
            case Say(text=text) if text.startswith("arm:"):
                name, delay = text.removeprefix("arm:").split("@")
                self.start_timer(name, delay=float(delay))
            case Say(text="own"):
                self.spawn(self._forever())
            case Say(text="own-failing"):
                self.spawn(self._fail_later())
            case Say(text="crash"):
                raise RuntimeError("crash")
            case Say(text=text):
                self.handled.append((text, now))


def _loop_errors(loop: asyncio.AbstractEventLoop) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    return errors


def test_a_timer_firing_into_a_full_data_lane_is_delivered_not_lost() -> None:
    async def main() -> tuple[list[tuple[str, float]], list[dict[str, Any]]]:
        errors = _loop_errors(asyncio.get_running_loop())
        actor = Timed(capacity=1)
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await actor.tell(say("arm:t@1"))
            await actor.tell(say("wait"))
            await asyncio.sleep(0.1)
            await actor.tell(say("queued"))  # the lane (capacity 1) is now full
            await asyncio.sleep(2.0)  # the timer fires into the full lane
            actor.gate.set()
            await asyncio.sleep(0.1)
            await scope.shutdown()
        return actor.handled, errors

    handled, errors = run(main())
    assert [h for h, _ in handled] == ["wait", "queued", "timer:t"]
    assert errors == []


def test_an_interruption_drops_queued_data_but_keeps_fired_timers() -> None:
    async def main() -> list[str]:
        actor = Timed()
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await actor.tell(say("arm:t@1"))
            await actor.tell(say("wait"))
            await actor.tell(say("dropped"))
            await asyncio.sleep(2.0)
            actor.interrupt_data()
            await asyncio.sleep(0.1)
            await scope.shutdown()
        return [h for h, _ in actor.handled]

    assert run(main()) == ["timer:t"]


def test_a_timer_whose_message_is_urgent_arrives_on_the_urgent_lane() -> None:
    async def main() -> list[tuple[str, float]]:
        actor = Timed()
        actor.urgent_timer = True
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await actor.tell(say("arm:bound@1"))
            await actor.tell(say("wait"))  # the data lane is busy for good
            await asyncio.sleep(2.0)
            await scope.shutdown(grace=0.1)
        return actor.handled

    assert run(main()) == [("urgent:timer bound", 1.0)]


def test_stop_cancels_timers_and_owned_tasks() -> None:
    async def main() -> Timed:
        actor = Timed()
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await actor.tell(say("arm:t@5"))
            await actor.tell(say("own"))
            await asyncio.sleep(0.1)
            await scope.shutdown()
            await asyncio.sleep(10.0)
        return actor

    actor = run(main())
    assert actor.handled == []
    assert actor.task_cancelled == 1
    assert actor.timers == {}


def test_a_restart_drops_the_crashed_instances_timers_and_tasks_and_calls_on_restart() -> None:
    async def main() -> Timed:
        actor = Timed()
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await actor.tell(say("arm:t@5"))
            await actor.tell(say("own"))
            await actor.tell(say("crash"))
            await asyncio.sleep(10.0)  # t would have fired at 5 s
            await actor.tell(say("after"))
            await asyncio.sleep(0.1)
            await scope.shutdown()
        return actor

    actor = run(main())
    assert actor.restarts == [{"t": 5.0}]
    assert actor.task_cancelled == 1
    assert [h for h, _ in actor.handled] == ["after"]


def test_an_owned_task_that_fails_crashes_the_actor_and_supervision_restarts_it() -> None:
    async def main() -> tuple[Timed, Any]:
        actor = Timed()
        async with CallScope(CALL, budget=RestartBudget(max_restarts=3)) as scope:
            scope.start_actor(actor)
            await actor.tell(say("own-failing"))
            await asyncio.sleep(2.0)
            await actor.tell(say("still here"))
            await asyncio.sleep(0.1)
            await scope.shutdown()
        return actor, scope.escalation

    actor, escalation = run(main())
    assert len(actor.restarts) == 1
    assert [h for h, _ in actor.handled] == ["still here"]
    assert escalation is None


class _StuckSession(Actor):
    """A session that never answers a reply request (the controller waits out its ask)."""

    def __init__(self) -> None:
        super().__init__("session")

    async def receive(self, msg: Any) -> Any:
        if isinstance(msg, GenerateReply):
            await asyncio.Event().wait()
        return None


def test_the_controllers_max_call_timer_survives_a_full_mailbox() -> None:
    """Regression: the timer's TimerFired used to raise MailboxFull in a loop callback."""

    async def main() -> tuple[list[CallEnded], list[dict[str, Any]]]:
        errors = _loop_errors(asyncio.get_running_loop())
        bus = Bus(CALL)
        ended: list[CallEnded] = []
        session = _StuckSession()
        controller = CallControllerActor(
            call_id=CALL,
            bus=bus,
            policy=ControllerPolicy(direction="inbound", max_call_seconds=5.0),
            session=session,
            on_end=ended.append,
        )
        async with CallScope(CALL) as scope:
            scope.start_actor(session)
            scope.start_actor(controller)
            bus.publish(CallAnswered(call_id=CALL, at=0.0))  # greets: stuck for 10 s
            await asyncio.sleep(0.1)
            for i in range(300):  # more than the data lane holds
                bus.publish(UserSpeechStarted(call_id=CALL, at=0.2 + i * 0.001))
            await asyncio.sleep(30.0)
            await scope.shutdown()
        return ended, errors

    ended, errors = run(main())
    assert [e.reason for e in ended] == ["max call duration"]
    assert not [e for e in errors if "MailboxFull" in repr(e.get("exception"))]
