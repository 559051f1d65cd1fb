"""Actors: a mailbox with an urgent lane and a bounded data lane, tell and ask.

Semantics (after pykka and Pipecat):

- ``tell`` is fire-and-forget. A failure while handling a told message crashes
  the actor; its supervisor decides whether to restart it.
- ``ask`` is request/reply with a timeout. A failure while handling an asked
  message goes back to the asker; the actor keeps running.
- Urgent messages (message classes marked ``urgent = True``) never wait behind data:
  they have their own unbounded lane and their own consumer, so a cancel or a
  hang-up is handled even while a long data handler runs.
- The data lane is bounded: ``tell`` awaits when it is full (back-pressure).
- When an actor stops, every queued ``ask`` fails with :class:`ActorStopped`.
- Timers and owned tasks belong to the kernel (:meth:`Actor.start_timer`,
  :meth:`Actor.spawn`). A fired timer's message never meets a full lane: it
  joins the data lane in firing order past its bound (or the urgent lane when
  its kind is urgent), and an interruption keeps it. Stop and restart cancel
  the timers and tasks of the instance that ran; a restart then calls
  :meth:`Actor.on_restart` with the timers it lost, so the actor decides what
  to arm again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("agent.core")

__all__ = ["Actor", "ActorStopped", "AskTimeout", "MailboxFull"]


class ActorStopped(RuntimeError):
    """The actor stopped before it could handle the message."""


class AskTimeout(TimeoutError):
    """An ``ask`` got no reply within its timeout."""


class MailboxFull(RuntimeError):
    """``tell_nowait`` found the bounded data lane full."""


@dataclass(eq=False)
class _Envelope:
    msg: Any
    reply: asyncio.Future[Any] | None = None
    sent_at: float = field(default=0.0)
    #: a fired timer: kept by interruptions, dropped by a restart
    timer: str | None = None


_STOP = object()


class _DataLane(asyncio.Queue[_Envelope | object]):
    """The bounded data lane, with one way past the bound: fired timers.

    A timer fires in a loop callback, which cannot wait for room; its message is
    small and timers are few, so it may overfill the lane instead of being lost.
    """

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self._past_bound = False

    def full(self) -> bool:
        return not self._past_bound and super().full()

    def put_past_bound(self, item: _Envelope | object) -> None:
        self._past_bound = True
        try:
            self.put_nowait(item)
        finally:
            self._past_bound = False


class Actor:
    """Base class for actors. Subclasses implement :meth:`receive`.

    Args:
        name: a short name for logs and errors.
        capacity: size of the bounded data lane.
    """

    def __init__(self, name: str, *, capacity: int = 256) -> None:
        self.name = name
        self._urgent: asyncio.Queue[_Envelope | object] = asyncio.Queue()
        self._data = _DataLane(capacity)
        self._stopped = False
        self._stop_reason: str = "stopped"
        self._current: asyncio.Task[Any] | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._owned: set[asyncio.Task[Any]] = set()
        self._crash: asyncio.Future[BaseException] | None = None

    # -- hooks -------------------------------------------------------------

    async def on_start(self) -> None:
        """Called each time the actor (re)starts, before any message."""

    async def on_stop(self) -> None:
        """Called once when the actor stops for good (its timers and tasks are cancelled)."""

    async def on_restart(self, error: BaseException, timers: Mapping[str, float]) -> None:
        """Called after a crash, before the actor runs again.

        The crashed instance's timers and owned tasks are already cancelled; the
        state the actor keeps in its attributes survives. Re-arm what must not be
        lost (``timers`` maps each cancelled timer to its loop-time deadline).
        """

    def timer_message(self, name: str, at: float) -> Any:
        """The message a timer named ``name`` delivers when it fires at loop time ``at``."""
        raise NotImplementedError(f"actor {self.name!r} starts timers but builds no message")

    async def receive(self, msg: Any) -> Any:
        """Handle one message; the return value is the reply to an ``ask``."""
        raise NotImplementedError

    # -- timers and owned tasks -------------------------------------------

    def start_timer(
        self, name: str, *, delay: float | None = None, at: float | None = None
    ) -> None:
        """(Re)arm timer ``name`` for loop time ``at`` or ``delay`` seconds from now.

        When it fires, :meth:`timer_message` is delivered to this actor; it cannot
        be lost to a full lane. Arming a name that is armed replaces it.
        """
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        when = at if at is not None else loop.time() + max(0.0, delay or 0.0)
        self.cancel_timer(name)
        self._timers[name] = loop.call_at(when, self._fire_timer, name)

    def cancel_timer(self, name: str) -> bool:
        """Disarm timer ``name``; False when it was not armed."""
        handle = self._timers.pop(name, None)
        if handle is None:
            return False
        handle.cancel()
        return True

    @property
    def timers(self) -> dict[str, float]:
        """The armed timers: name -> loop-time deadline."""
        return {name: h.when() for name, h in self._timers.items()}

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None, crash: bool = True
    ) -> asyncio.Task[Any]:
        """Start a task this actor owns: cancelled when the actor stops or restarts.

        An exception in it crashes the actor like a failed ``tell`` (supervision
        applies), unless ``crash`` is False: then whoever awaits the task (the
        asker of a check, say) gets the exception.
        """
        task = asyncio.get_running_loop().create_task(coro, name=name or f"{self.name}:task")
        self._owned.add(task)
        task.add_done_callback(self._owned_done if crash else self._owned.discard)
        return task

    def _owned_done(self, task: asyncio.Task[Any]) -> None:
        self._owned.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._crash_with(exc, where=task.get_name())

    def _crash_with(self, exc: BaseException, *, where: str) -> None:
        if self._crash is not None and not self._crash.done() and not self._stopped:
            self._crash.set_result(exc)
        else:
            logger.error(
                "actor failed while not running",
                extra={"actor": self.name, "where": where},
                exc_info=exc,
            )

    def _fire_timer(self, name: str) -> None:
        self._timers.pop(name, None)
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        try:
            msg = self.timer_message(name, loop.time())
        except Exception as exc:
            self._crash_with(exc, where=f"timer {name}")
            return
        env = _Envelope(msg, timer=name)
        if self._is_urgent(msg):
            self._urgent.put_nowait(env)
        else:
            self._data.put_past_bound(env)

    def _cancel_timers(self) -> dict[str, float]:
        lost = self.timers
        for name in list(self._timers):
            self.cancel_timer(name)
        return lost

    async def _cancel_owned(self) -> None:
        tasks = [t for t in self._owned if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _recover(self, error: BaseException) -> None:
        """Forget the crashed instance's timers and tasks, then run ``on_restart``."""
        lost = self._cancel_timers()
        loop = asyncio.get_running_loop()
        # fired timers still queued belonged to the crashed instance too
        for lane in (self._urgent, self._data):
            kept: list[_Envelope | object] = []
            while True:
                try:
                    env = lane.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if isinstance(env, _Envelope) and env.timer is not None:
                    lost.setdefault(env.timer, loop.time())
                else:
                    kept.append(env)
            for env in kept:
                if lane is self._data:
                    self._data.put_past_bound(env)
                else:
                    lane.put_nowait(env)
        await self._cancel_owned()
        await self.on_restart(error, lost)

    # -- sending -----------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self._stopped

    @staticmethod
    def _is_urgent(msg: Any) -> bool:
        # the message's class says so (``urgent = True``), for every actor alike
        return getattr(type(msg), "urgent", False) is True

    def _check_open(self, msg: Any) -> None:
        if self._stopped:
            kind = getattr(msg, "kind", type(msg).__name__)
            raise ActorStopped(f"actor {self.name!r} {self._stop_reason}; cannot deliver {kind!r}")

    async def tell(self, msg: Any) -> None:
        """Send without waiting for handling; waits only while the data lane is full."""
        self._check_open(msg)
        env = _Envelope(msg)
        if self._is_urgent(msg):
            self._urgent.put_nowait(env)
        else:
            await self._data.put(env)

    def tell_nowait(self, msg: Any) -> None:
        """Send without waiting at all; raises :class:`MailboxFull` if the data lane is full."""
        self._check_open(msg)
        env = _Envelope(msg)
        if self._is_urgent(msg):
            self._urgent.put_nowait(env)
            return
        try:
            self._data.put_nowait(env)
        except asyncio.QueueFull:
            kind = getattr(msg, "kind", type(msg).__name__)
            raise MailboxFull(f"actor {self.name!r} data lane is full; dropped {kind!r}") from None

    # The ``timeout`` argument is the documented ask API (docs/architecture.md, "Actors"); it is
    # applied with asyncio.timeout on the loop clock inside.
    async def ask(self, msg: Any, *, timeout: float) -> Any:  # noqa: ASYNC109
        """Send and wait for the reply; the handler's exception is raised here."""
        self._check_open(msg)
        loop = asyncio.get_running_loop()
        env = _Envelope(msg, reply=loop.create_future())
        assert env.reply is not None
        # The timeout also bounds waiting for room in a full data lane, and only
        # its own expiry is an AskTimeout: a TimeoutError raised by the handler
        # goes back to the asker unchanged.
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                if self._is_urgent(msg):
                    self._urgent.put_nowait(env)
                else:
                    await self._data.put(env)
                return await asyncio.shield(env.reply)
        except TimeoutError:
            if not deadline.expired():
                raise
            env.reply.cancel()
            kind = getattr(msg, "kind", type(msg).__name__)
            raise AskTimeout(f"actor {self.name!r} did not answer {kind!r} in {timeout}s") from None

    def stop(self, reason: str = "stopped") -> None:
        """Ask the actor to stop after the message it is handling."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_reason = reason
        self._cancel_timers()
        self._urgent.put_nowait(_STOP)
        self._data.put_past_bound(_STOP)

    def interrupt_data(self) -> int:
        """Cancel the data handler in flight and drop queued data messages.

        The askers of dropped messages see their ask cancelled (``CancelledError``).
        Fired timers are kept (like control frames, they survive an interruption).
        Returns the number of messages dropped. Call from an urgent handler.
        """
        dropped = 0
        kept: list[_Envelope | object] = []
        while True:
            try:
                env = self._data.get_nowait()
            except asyncio.QueueEmpty:
                break
            if env is _STOP:
                kept.append(env)
                break
            assert isinstance(env, _Envelope)
            if env.timer is not None:
                kept.append(env)
                continue
            if env.reply is not None and not env.reply.done():
                env.reply.cancel()
            dropped += 1
        for env in kept:
            self._data.put_past_bound(env)
        if self._current is not None and not self._current.done():
            self._current.cancel()
        return dropped

    # -- running -----------------------------------------------------------

    async def run(self) -> None:
        """Run until stopped. Raises the exception of a failed ``tell`` (a crash)."""
        await self.on_start()
        crash: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self._crash = crash
        async with asyncio.TaskGroup() as tg:
            urgent = tg.create_task(self._consume(self._urgent, crash), name=f"{self.name}:urgent")
            data = tg.create_task(self._consume(self._data, crash), name=f"{self.name}:data")
            # On stop() each lane finishes the message in hand and then ends; a
            # crash ends both at once. A handler that never finishes is cancelled
            # by the supervisor's grace.
            lanes: set[asyncio.Future[Any]] = {urgent, data}
            while lanes and not crash.done():
                _, lanes = await asyncio.wait([*lanes, crash], return_when=asyncio.FIRST_COMPLETED)
                lanes.discard(crash)
            urgent.cancel()
            data.cancel()
        if crash.done():
            raise crash.result()

    async def _consume(
        self, lane: asyncio.Queue[_Envelope | object], crash: asyncio.Future[BaseException]
    ) -> None:
        while True:
            env = await lane.get()
            if env is _STOP:
                return
            assert isinstance(env, _Envelope)
            if self._stopped:
                # stop() came while the previous message was handled: this one
                # is not handled (and was taken off the lane, so fail it here).
                self._fail_stopped(env)
                return
            if env.reply is not None and env.reply.done():
                continue  # the asker gave up
            handler = asyncio.ensure_future(self.receive(env.msg))
            if lane is self._data:
                self._current = handler
            try:
                result = await handler
            except asyncio.CancelledError:
                if handler.cancelled() and not _being_cancelled():
                    # interrupted by interrupt_data(); the actor goes on
                    if env.reply is not None and not env.reply.done():
                        env.reply.cancel()
                    continue
                handler.cancel()
                # Hard stop: the asker learns now instead of at its timeout.
                self._fail_stopped(env)
                raise
            except Exception as exc:
                if env.reply is not None:
                    if not env.reply.done():
                        env.reply.set_exception(exc)
                    continue
                if not crash.done():
                    crash.set_result(exc)
                return
            finally:
                if lane is self._data:
                    self._current = None
            if env.reply is not None and not env.reply.done():
                env.reply.set_result(result)

    async def _finalize(self) -> None:
        """Fail queued asks, cancel timers and tasks, run ``on_stop`` (once, by the supervisor)."""
        self._stopped = True
        self._cancel_timers()
        await self._cancel_owned()
        for lane in (self._urgent, self._data):
            while True:
                try:
                    env = lane.get_nowait()
                except asyncio.QueueEmpty:
                    break
                if isinstance(env, _Envelope):
                    self._fail_stopped(env)
        try:
            await self.on_stop()
        except Exception:
            logger.exception("actor on_stop failed", extra={"actor": self.name})

    def _fail_stopped(self, env: _Envelope) -> None:
        if env.reply is not None and not env.reply.done():
            kind = getattr(env.msg, "kind", type(env.msg).__name__)
            env.reply.set_exception(
                ActorStopped(f"actor {self.name!r} {self._stop_reason}; {kind!r} not handled")
            )


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return bool(task and task.cancelling())
