"""Supervision: restarts within a budget, escalation, cooperative then hard shutdown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.core import Actor, ActorStopped, CallScope, Escalation, RestartBudget, run
from agent.core.messages import Say

CALL = "call_test"


def say(text: str) -> Say:
    return Say(call_id=CALL, text=text)


class Flaky(Actor):
    """Crashes on ``say("crash")``; ``say("sleep:N")`` takes N seconds; echoes otherwise."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.starts: list[float] = []
        self.stops = 0
        self.finished: list[tuple[str, float]] = []
        self.cancelled: list[float] = []

    async def on_start(self) -> None:
        self.starts.append(asyncio.get_running_loop().time())

    async def on_stop(self) -> None:
        self.stops += 1

    async def receive(self, msg: Any) -> Any:
        loop = asyncio.get_running_loop()
        match msg:
            case Say(text="crash"):
                raise RuntimeError(f"{self.name} crashed at {loop.time():g}")
            case Say(text=text) if text.startswith("sleep:"):
                try:
                    await asyncio.sleep(float(text.removeprefix("sleep:")))
                except asyncio.CancelledError:
                    self.cancelled.append(loop.time())
                    raise
                self.finished.append((text, loop.time()))
                return text
            case Say(text=text):
                return text
        raise AssertionError(f"unexpected {msg!r}")


class Recorder:
    """An ``on_escalate`` callback that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Escalation, float]] = []

    async def __call__(self, esc: Escalation) -> None:
        await asyncio.sleep(0)  # an async callback is awaited
        self.calls.append((esc, asyncio.get_running_loop().time()))


def _only_current_task_left() -> bool:
    return asyncio.all_tasks() == {asyncio.current_task()}


async def _crash_at(actor: Actor, times: list[float]) -> None:
    loop = asyncio.get_running_loop()
    for at in times:
        await asyncio.sleep(at - loop.time())
        await actor.tell(say("crash"))


def test_crashing_actor_is_restarted_within_the_budget() -> None:
    async def main() -> None:
        on_escalate = Recorder()
        flaky = Flaky("flaky")
        async with CallScope(CALL, on_escalate=on_escalate) as scope:
            scope.start_actor(flaky)
            await _crash_at(flaky, [1.0, 2.0, 3.0])
            await asyncio.sleep(1)
            # Three crashes in 30 s are within the default budget: still serving.
            assert await flaky.ask(say("alive"), timeout=1) == "alive"
            assert flaky.starts == pytest.approx([0.0, 1.0, 2.0, 3.0])
            assert not flaky.stopped
            assert on_escalate.calls == []
            await scope.shutdown()
        assert flaky.stops == 1
        assert scope.escalation is None
        assert _only_current_task_left()

    run(main())


def test_too_many_crashes_escalate_once_and_end_the_scope() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        on_escalate = Recorder()
        flaky = Flaky("flaky")
        healthy = Flaky("healthy")
        daemon_cancelled: list[float] = []

        async def pump() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                daemon_cancelled.append(loop.time())
                raise

        async with asyncio.timeout(600):  # a scope that never ends fails fast, not at 120 s
            async with CallScope(CALL, on_escalate=on_escalate) as scope:
                scope.start_actor(flaky)
                scope.start_actor(healthy)
                scope.spawn(pump(), name="pump", daemon=True)
                await _crash_at(flaky, [1.0, 5.0, 10.0, 20.0])
                behind_the_crash = asyncio.create_task(flaky.ask(say("late"), timeout=60))
            # Leaving the block returns once the escalation ended every task.
        ended_at = loop.time()
        with pytest.raises(ActorStopped, match="'flaky' crashed"):
            await behind_the_crash

        assert len(on_escalate.calls) == 1
        esc, escalated_at = on_escalate.calls[0]
        assert esc.actor == "flaky"
        assert isinstance(esc.error, RuntimeError)
        assert str(esc.error) == "flaky crashed at 20"
        assert escalated_at == pytest.approx(20.0)
        assert scope.escalation == esc
        assert flaky.starts == pytest.approx([0.0, 1.0, 5.0, 10.0])
        assert flaky.stopped and healthy.stopped
        assert flaky.stops == 1 and healthy.stops == 1
        assert daemon_cancelled == pytest.approx([20.0])
        assert ended_at == pytest.approx(20.0)
        assert _only_current_task_left()

    run(main())


def test_escalation_calls_a_sync_callback_once_even_if_several_actors_exhaust_the_budget() -> None:
    async def main() -> None:
        calls: list[Escalation] = []
        a, b = Flaky("a"), Flaky("b")
        budget = RestartBudget(max_restarts=1, window=10.0)
        async with asyncio.timeout(600):
            async with CallScope(CALL, budget=budget, on_escalate=calls.append) as scope:
                scope.start_actor(a)
                scope.start_actor(b)
                for _ in range(2):
                    # Both crash in the same instant: the second crash of each
                    # exceeds the budget, but the call ends (and is reported) once.
                    await asyncio.sleep(1)
                    a.tell_nowait(say("crash"))
                    b.tell_nowait(say("crash"))
        assert [esc.actor for esc in calls] == ["a"]
        assert scope.escalation is not None and scope.escalation.actor == "a"
        assert a.stops == 1 and b.stops == 1
        assert _only_current_task_left()

    run(main())


def test_crashes_spread_over_more_than_the_window_do_not_escalate() -> None:
    async def main() -> None:
        on_escalate = Recorder()
        flaky = Flaky("flaky")
        crash_times = [11.0 * i for i in range(1, 7)]  # never 4 within 30 s
        async with CallScope(CALL, on_escalate=on_escalate) as scope:
            scope.start_actor(flaky)
            await _crash_at(flaky, crash_times)
            await asyncio.sleep(1)
            assert await flaky.ask(say("alive"), timeout=1) == "alive"
            await scope.shutdown()
        assert on_escalate.calls == []
        assert flaky.starts == pytest.approx([0.0, *crash_times])
        assert scope.escalation is None

    run(main())


def test_the_window_boundary_counts_as_within_the_window() -> None:
    async def main() -> None:
        on_escalate = Recorder()
        flaky = Flaky("flaky")
        async with asyncio.timeout(600):
            async with CallScope(CALL, on_escalate=on_escalate) as scope:
                scope.start_actor(flaky)
                await _crash_at(flaky, [10.0, 20.0, 30.0, 40.0])
        assert [esc.actor for esc, _ in on_escalate.calls] == ["flaky"]
        assert on_escalate.calls[0][1] == pytest.approx(40.0)

    run(main())


def test_shutdown_stops_actors_cooperatively_and_cancels_stragglers_after_grace() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        quick, stuck = Flaky("quick"), Flaky("stuck")
        daemon_cancelled: list[float] = []
        worker_done: list[float] = []

        async def pump() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                daemon_cancelled.append(loop.time())
                raise

        async def worker() -> None:
            await asyncio.sleep(3)
            worker_done.append(loop.time())

        async with CallScope(CALL) as scope:
            scope.start_actor(quick)
            scope.start_actor(stuck)
            scope.spawn(pump(), daemon=True)
            scope.spawn(worker())
            await quick.tell(say("sleep:1"))
            await quick.tell(say("sleep:1-never-started"))
            await stuck.tell(say("sleep:100"))
            await asyncio.sleep(0.5)
            await scope.shutdown(grace=5)
            shutdown_returned = loop.time()
        # Daemons go at once; the rest get the grace.
        assert daemon_cancelled == pytest.approx([0.5])
        # The cooperative actor finishes the message in hand, not the queued one.
        assert quick.finished == [("sleep:1", pytest.approx(1.0))]
        assert quick.cancelled == []
        assert worker_done == pytest.approx([3.0])
        # The straggler is cancelled once the grace is over.
        assert stuck.finished == []
        assert stuck.cancelled == pytest.approx([5.5])
        assert shutdown_returned == pytest.approx(5.5)
        assert quick.stops == 1 and stuck.stops == 1
        assert _only_current_task_left()

    run(main())


def test_shutdown_returns_as_soon_as_everything_stopped() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        actor = Flaky("idle")
        async with CallScope(CALL) as scope:
            scope.start_actor(actor)
            await asyncio.sleep(1)
            await scope.shutdown(grace=30)
            assert loop.time() == pytest.approx(1.0)
            assert scope.closing
        assert actor.stops == 1

    run(main())


def test_an_error_in_the_scope_body_cancels_every_task() -> None:
    async def main() -> None:
        actor = Flaky("a")
        with pytest.raises(ExceptionGroup) as err:
            async with CallScope(CALL) as scope:
                scope.start_actor(actor)
                scope.spawn(asyncio.sleep(3600))
                await asyncio.sleep(1)
                raise KeyError("body failed")
        assert [type(e) for e in err.value.exceptions] == [KeyError]
        assert actor.stopped and actor.stops == 1
        assert _only_current_task_left()

    run(main())


class CrashesLate(Flaky):
    """``say("sleep-then-crash")`` crashes after a second of work."""

    async def receive(self, msg: Any) -> Any:
        if isinstance(msg, Say) and msg.text == "sleep-then-crash":
            await asyncio.sleep(1)
            raise RuntimeError("crashed while stopping")
        return await super().receive(msg)


def test_an_actor_stopped_while_its_last_message_crashes_is_not_restarted() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        on_escalate = Recorder()
        actor = CrashesLate("late")
        async with asyncio.timeout(600):
            async with CallScope(CALL, on_escalate=on_escalate) as scope:
                scope.start_actor(actor)
                await actor.tell(say("sleep-then-crash"))
                await asyncio.sleep(0.5)
                actor.stop()
        assert actor.starts == pytest.approx([0.0])
        assert actor.stops == 1
        assert loop.time() == pytest.approx(1.0)
        assert [str(esc.error) for esc, _ in on_escalate.calls] == ["crashed while stopping"]

    run(main())
