"""A virtual-clock event loop for tests and fast replays.

The loop's ``time()`` is virtual. When the loop has nothing ready to run and no
executor work is in flight, it jumps straight to the next timer (``speed=None``)
or sleeps ``delay / speed`` real seconds first (``speed=N``). While any
``run_in_executor`` future (model inference) or an explicit :meth:`hold` is in
flight, virtual time does not move: the loop blocks on real I/O until the work
completes, so a replay's timeline does not depend on how fast the machine is.

Only the asyncio clock is virtual. Code that reads ``time.time()`` directly
(livekit's endpointing does, see ``docs/decisions.md``) still sees wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["VirtualClockLoop", "hold_clock", "run", "is_virtual"]


class _VirtualSelector(selectors.BaseSelector):
    """Wraps the real selector and turns idle waits into virtual-time jumps."""

    def __init__(self, loop: VirtualClockLoop, real: selectors.BaseSelector) -> None:
        self._loop = loop
        self._real = real

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        if timeout is not None and timeout <= 0:
            return self._real.select(0)
        if loop._holds > 0:
            # Work is in flight in another thread: wait for it for real, and let
            # no virtual time pass. Its completion wakes us through the self-pipe.
            return self._real.select(None if timeout is None else 0.25)
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:
            # Nothing scheduled and nothing in flight: only outside I/O can wake us.
            return self._real.select(None)
        if loop.speed is None:
            loop._advance(timeout)
            return []
        started = time.monotonic()
        ready = self._real.select(timeout / loop.speed)
        if ready:
            loop._advance(min(timeout, (time.monotonic() - started) * loop.speed))
        else:
            loop._advance(timeout)
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is virtual.

    Args:
        speed: ``None`` runs as fast as possible; a number N runs N times faster
            than real time where the loop would otherwise sleep.
        start: the virtual time the loop starts at.
    """

    def __init__(self, speed: float | None = None, start: float = 0.0) -> None:
        self.speed = speed
        self._now = start
        self._holds = 0
        super().__init__(selector=selectors.DefaultSelector())
        self._selector = _VirtualSelector(self, self._selector)  # type: ignore[has-type]
        if speed is not None and speed <= 0:
            # Validated after the base init so the half-built loop closes cleanly
            # instead of failing in BaseEventLoop.__del__.
            self.close()
            raise ValueError(f"speed must be positive, got {speed}")

    def time(self) -> float:
        return self._now

    def _advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Freeze virtual time while out-of-loop work runs (e.g. a model in a thread)."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            self._write_to_self()  # type: ignore[attr-defined]

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        fut = super().run_in_executor(executor, func, *args)
        self._holds += 1

        def _release(_: asyncio.Future[T]) -> None:
            self._holds -= 1

        fut.add_done_callback(_release)
        return fut

    async def shutdown_default_executor(self, *args: Any, **kwargs: Any) -> None:
        """Join the default executor's threads with virtual time frozen.

        ``asyncio.Runner`` (3.12+) bounds this with a timeout on the loop clock;
        threads still running inference must not make that timeout fire.
        """
        with self.hold():
            await super().shutdown_default_executor(*args, **kwargs)


def is_virtual(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Whether the (running) loop has a virtual clock."""
    loop = loop or asyncio.get_running_loop()
    return isinstance(loop, VirtualClockLoop)


@contextlib.contextmanager
def hold_clock() -> Iterator[None]:
    """Freeze virtual time around blocking work on the running loop (no-op on a real loop)."""
    loop = asyncio.get_running_loop()
    if isinstance(loop, VirtualClockLoop):
        with loop.hold():
            yield
    else:
        yield


def run(main: Coroutine[Any, Any, T], *, virtual: bool = True, speed: float | None = None) -> T:
    """Run a coroutine to completion on a fresh loop.

    Args:
        main: the coroutine.
        virtual: use a :class:`VirtualClockLoop` (otherwise a normal loop, real time).
        speed: with ``virtual``, ``None`` for as fast as possible or N times real time.
    """
    factory: Callable[[], asyncio.AbstractEventLoop]
    if virtual:
        factory = lambda: VirtualClockLoop(speed=speed)  # noqa: E731
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
