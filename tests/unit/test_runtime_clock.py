"""Virtual clock: idle waits jump, executor work and holds freeze time, speed paces."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agent.core import VirtualClockLoop, hold_clock, is_virtual, run

# Generous wall-clock ceiling for work that should be instant; a test never
# depends on how fast the machine is, only on this being far below the virtual span.
INSTANT = 5.0


def _finish_from_thread(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[str]) -> None:
    time.sleep(0.2)
    loop.call_soon_threadsafe(fut.set_result, "done")


def test_run_returns_result_on_a_virtual_loop() -> None:
    async def main() -> tuple[bool, str]:
        return is_virtual(), type(asyncio.get_running_loop()).__name__

    assert run(main()) == (True, "VirtualClockLoop")
    assert run(main(), virtual=False)[0] is False


def test_long_sleep_is_instant_and_advances_virtual_time() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(3600)
        return t0, loop.time()

    wall = time.monotonic()
    t0, t1 = run(main())
    assert time.monotonic() - wall < INSTANT
    assert t0 == 0.0
    assert t1 - t0 == pytest.approx(3600.0)


def test_timers_fire_in_order_at_their_virtual_times() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        fired: list[tuple[str, float]] = []
        done = asyncio.Event()

        def fire(name: str) -> None:
            fired.append((name, loop.time()))
            if name == "last":
                done.set()

        loop.call_later(2.5, fire, "c")
        loop.call_later(0.5, fire, "a")
        loop.call_at(1.0, fire, "b")
        loop.call_later(120.0, fire, "last")

        async def sleeper(delay: float, name: str) -> None:
            await asyncio.sleep(delay)
            fired.append((name, loop.time()))

        async with asyncio.TaskGroup() as tg:
            tg.create_task(sleeper(1.75, "sleep-1.75"))
            tg.create_task(sleeper(60.0, "sleep-60"))
        await done.wait()
        return fired

    fired = run(main())
    assert [name for name, _ in fired] == ["a", "b", "sleep-1.75", "c", "sleep-60", "last"]
    assert [at for _, at in fired] == pytest.approx([0.5, 1.0, 1.75, 2.5, 60.0, 120.0])


def test_clock_does_not_jump_while_executor_work_is_in_flight() -> None:
    async def main() -> tuple[float, bool, float, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slept_at: list[float] = []

        async def sleeper() -> None:
            await asyncio.sleep(10)
            slept_at.append(loop.time())

        pending = asyncio.create_task(sleeper())
        await asyncio.sleep(0)  # the sleeper's timer is now scheduled
        await loop.run_in_executor(None, time.sleep, 0.2)
        after_executor = loop.time()
        still_pending = not pending.done()
        await pending
        return t0, still_pending, after_executor, slept_at[0]

    t0, still_pending, after_executor, slept_at = run(main())
    assert after_executor - t0 == pytest.approx(0.0, abs=1e-9)
    assert still_pending
    assert slept_at - t0 == pytest.approx(10.0)


def test_clock_resumes_after_executor_work_finishes() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        marks: list[float] = []
        for _ in range(3):
            await loop.run_in_executor(None, time.sleep, 0.01)
            marks.append(loop.time())
            await asyncio.sleep(5)
            marks.append(loop.time())
        return marks

    assert run(main()) == pytest.approx([0.0, 5.0, 5.0, 10.0, 10.0, 15.0])


def test_hold_clock_freezes_virtual_time() -> None:
    async def main() -> tuple[float, float, bool, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slept_at: list[float] = []

        async def sleeper() -> None:
            await asyncio.sleep(10)
            slept_at.append(loop.time())

        pending = asyncio.create_task(sleeper())
        await asyncio.sleep(0)
        fut: asyncio.Future[str] = loop.create_future()
        worker = threading.Thread(target=_finish_from_thread, args=(loop, fut))
        with hold_clock():
            worker.start()
            assert await fut == "done"
            held = loop.time()
        worker.join()
        still_pending = not pending.done()
        await pending
        return t0, held, still_pending, slept_at[0]

    t0, held, still_pending, slept_at = run(main())
    assert held - t0 == pytest.approx(0.0, abs=1e-9)
    assert still_pending
    assert slept_at - t0 == pytest.approx(10.0)


def test_hold_clock_is_a_no_op_on_a_real_loop() -> None:
    async def main() -> bool:
        with hold_clock():
            await asyncio.sleep(0)
        return is_virtual()

    assert run(main(), virtual=False) is False


def test_executor_shutdown_does_not_time_out_on_virtual_time() -> None:
    # asyncio.Runner (3.12+) shuts the default executor down under a 300 s
    # timeout; on a virtual loop that timeout must not fire while threads join.
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, time.sleep, 0.01)
        loop.run_in_executor(None, time.sleep, 0.2)
        async with asyncio.timeout(300):
            await loop.shutdown_default_executor()
        return loop.time()

    assert run(main()) == pytest.approx(0.0, abs=1e-9)


def test_speed_paces_sleeps_against_wall_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(2.0)
        return loop.time()

    wall = time.monotonic()
    virtual_now = run(main(), speed=100)
    elapsed = time.monotonic() - wall
    assert virtual_now == pytest.approx(2.0)
    # 2 s of virtual time at 100x is 0.02 s real: never faster than that, and
    # certainly not the full 2 s (only lower bounds are exact; the upper is loose).
    assert elapsed >= 0.01
    assert elapsed < 2.0


def test_speed_1000_one_virtual_second_is_under_a_real_second() -> None:
    async def main() -> float:
        await asyncio.sleep(1.0)
        return asyncio.get_running_loop().time()

    wall = time.monotonic()
    assert run(main(), speed=1000) == pytest.approx(1.0)
    assert time.monotonic() - wall < 1.0


def test_speed_must_be_positive() -> None:
    with pytest.raises(ValueError, match="speed must be positive"):
        VirtualClockLoop(speed=0)


def test_wait_for_times_out_on_virtual_time() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), timeout=90)
        after_wait_for = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.Event().wait()
        return after_wait_for, loop.time()

    wall = time.monotonic()
    after_wait_for, after_timeout = run(main())
    assert time.monotonic() - wall < INSTANT
    assert after_wait_for == pytest.approx(90.0)
    assert after_timeout == pytest.approx(120.0)


def test_wait_for_does_not_time_out_while_executor_runs() -> None:
    # Inference slower in real time than its virtual budget still completes:
    # the budget is measured on the frozen virtual clock.
    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()

        def infer() -> str:
            time.sleep(0.2)
            return "reply"

        work = loop.run_in_executor(None, infer)
        result = await asyncio.wait_for(work, timeout=0.01)
        return result, loop.time()

    result, now = run(main())
    assert result == "reply"
    assert now == pytest.approx(0.0, abs=1e-9)
