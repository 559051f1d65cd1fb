"""Supervision and the per-call task scope.

Every call runs in one :class:`CallScope`, which owns one ``asyncio.TaskGroup``.
Actors are started under a :class:`RestartBudget`: a crash restarts the actor
unless more than ``max_restarts`` crashes happened within ``window`` seconds (on
the loop's clock), in which case the scope escalates: ``on_escalate`` is called
(the call ends with disposition ``error``) and nothing is left running.
Before a restart the crashed instance's timers and owned tasks are cancelled
and the actor's ``on_restart`` hook runs (a failing hook counts as a crash).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from agent.core.actor import Actor

logger = logging.getLogger("agent.core")

__all__ = ["RestartBudget", "CallScope", "Escalation"]


@dataclass(frozen=True)
class RestartBudget:
    """How many crashes an actor may have in a window before escalation."""

    max_restarts: int = 3
    window: float = 30.0


@dataclass(frozen=True)
class Escalation:
    """Why a scope escalated: which actor crashed too often, and the last error."""

    actor: str
    error: BaseException


EscalateFn = Callable[[Escalation], Awaitable[None] | None]


class CallScope:
    """Owns every task of one call.

    Use as ``async with CallScope(...) as scope:``; leaving the block waits for
    every task. :meth:`shutdown` stops actors cooperatively, then cancels what is
    still running after ``grace`` seconds.
    """

    def __init__(
        self,
        name: str,
        *,
        budget: RestartBudget | None = None,
        on_escalate: EscalateFn | None = None,
    ) -> None:
        self.name = name
        self.budget = budget or RestartBudget()
        self._on_escalate = on_escalate
        self._tg = asyncio.TaskGroup()
        self._actors: list[Actor] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._daemons: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.escalation: Escalation | None = None

    async def __aenter__(self) -> CallScope:
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> bool | None:
        if et is not None:
            self._cancel_all()
        await self._tg.__aexit__(et, ev, tb)
        return None

    @property
    def closing(self) -> bool:
        return self._closing

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None, daemon: bool = False
    ) -> asyncio.Task[Any]:
        """Start a task owned by this scope.

        A ``daemon`` task (a pump, a timer) is cancelled at once by
        :meth:`shutdown`; other tasks get the grace period to finish.
        """
        task = self._tg.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if daemon:
            self._daemons.add(task)
            task.add_done_callback(self._daemons.discard)
        return task

    def start_actor(self, actor: Actor) -> asyncio.Task[None]:
        """Run an actor under supervision in this scope."""
        self._actors.append(actor)
        return self.spawn(self._supervise(actor), name=f"{self.name}:{actor.name}")

    async def _supervise(self, actor: Actor) -> None:
        loop = asyncio.get_running_loop()
        crashes: deque[float] = deque()
        last: BaseException | None = None
        try:
            while True:
                try:
                    if last is not None:
                        # the crashed instance's timers and tasks go; on_restart decides
                        await actor._recover(last)
                    await actor.run()
                    return
                except Exception as exc:
                    now = loop.time()
                    crashes.append(now)
                    while crashes and now - crashes[0] > self.budget.window:
                        crashes.popleft()
                    # A stopped actor is never restarted: its lanes are closed.
                    stopping = self._closing or actor.stopped
                    if len(crashes) > self.budget.max_restarts or stopping:
                        logger.error(
                            "actor crashed too often; escalating",
                            extra={"actor": actor.name, "scope": self.name},
                            exc_info=exc,
                        )
                        actor.stop("crashed")
                        await self._escalate(Escalation(actor.name, exc))
                        return
                    logger.warning(
                        "actor crashed; restarting",
                        extra={"actor": actor.name, "scope": self.name, "crashes": len(crashes)},
                        exc_info=exc,
                    )
                    last = exc
        finally:
            await actor._finalize()

    async def _escalate(self, esc: Escalation) -> None:
        if self.escalation is not None:
            return  # the call is already ending on an earlier escalation: report it once
        self.escalation = esc
        try:
            if self._on_escalate is not None:
                res = self._on_escalate(esc)
                if asyncio.iscoroutine(res):
                    await res
        finally:
            # Escalation ends the call: nothing of it may be left running.
            await self.shutdown()

    async def shutdown(self, grace: float = 2.0) -> None:
        """Stop every actor, then cancel whatever is still running after ``grace``."""
        self._closing = True
        for actor in self._actors:
            actor.stop("stopped: call ended")
        me = asyncio.current_task()
        for t in list(self._daemons):
            if t is not me:
                t.cancel()
        pending = [t for t in self._tasks if t is not me and not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for t in still:
                t.cancel()

    def _cancel_all(self) -> None:
        self._closing = True
        for actor in self._actors:
            actor.stop("stopped: call aborted")
        for t in self._tasks:
            t.cancel()
