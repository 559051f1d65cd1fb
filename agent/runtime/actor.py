"""Actors: a mailbox with an urgent lane and a bounded data lane, tell and ask.

Semantics (after pykka and Pipecat):

- ``tell`` is fire-and-forget. A failure while handling a told message crashes
  the actor; its supervisor decides whether to restart it.
- ``ask`` is request/reply with a timeout. A failure while handling an asked
  message goes back to the asker; the actor keeps running.
- Urgent messages (kinds listed in ``urgent_kinds``) never wait behind data:
  they have their own unbounded lane and their own consumer, so a cancel or a
  hang-up is handled even while a long data handler runs.
- The data lane is bounded: ``tell`` awaits when it is full (back-pressure).
- When an actor stops, every queued ``ask`` fails with :class:`ActorStopped`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

logger = logging.getLogger("agent.runtime")

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


_STOP = object()


class Actor:
    """Base class for actors. Subclasses implement :meth:`receive`.

    Args:
        name: a short name for logs and errors.
        capacity: size of the bounded data lane.
    """

    urgent_kinds: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, name: str, *, capacity: int = 256) -> None:
        self.name = name
        self._urgent: asyncio.Queue[_Envelope | object] = asyncio.Queue()
        self._data: asyncio.Queue[_Envelope | object] = asyncio.Queue(maxsize=capacity)
        self._stopped = False
        self._stop_reason: str = "stopped"
        self._current: asyncio.Task[Any] | None = None

    # -- hooks -------------------------------------------------------------

    async def on_start(self) -> None:
        """Called each time the actor (re)starts, before any message."""

    async def on_stop(self) -> None:
        """Called once when the actor stops for good."""

    async def receive(self, msg: Any) -> Any:
        """Handle one message; the return value is the reply to an ``ask``."""
        raise NotImplementedError

    # -- sending -----------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _is_urgent(self, msg: Any) -> bool:
        return getattr(msg, "kind", None) in self.urgent_kinds

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

    # The ``timeout`` argument is the documented ask API (DESIGN.md); it is
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
        self._urgent.put_nowait(_STOP)
        with _suppress_full():
            self._data.put_nowait(_STOP)

    def interrupt_data(self) -> int:
        """Cancel the data handler in flight and drop queued data messages.

        The askers of dropped messages see their ask cancelled (``CancelledError``). Returns
        the number of messages dropped. Call from an urgent handler.
        """
        dropped = 0
        while True:
            try:
                env = self._data.get_nowait()
            except asyncio.QueueEmpty:
                break
            if env is _STOP:
                self._data.put_nowait(env)
                break
            assert isinstance(env, _Envelope)
            if env.reply is not None and not env.reply.done():
                env.reply.cancel()
            dropped += 1
        if self._current is not None and not self._current.done():
            self._current.cancel()
        return dropped

    # -- running -----------------------------------------------------------

    async def run(self) -> None:
        """Run until stopped. Raises the exception of a failed ``tell`` (a crash)."""
        await self.on_start()
        crash: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
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
        """Fail queued asks and run ``on_stop``. Called once by the supervisor."""
        self._stopped = True
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


class _suppress_full:
    def __enter__(self) -> None:
        return None

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        return et is asyncio.QueueFull
