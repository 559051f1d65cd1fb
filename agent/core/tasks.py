"""Which tasks belong to which call, including tasks a library starts for it.

livekit's AgentSession starts tasks of its own that our scope does not own.
A task factory installed on the loop tags every task with the call that (directly
or indirectly) created it, through a context variable that new tasks inherit,
so a call can wait for its stragglers and cancel them without touching the
tasks of any other call running on the same loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Coroutine
from typing import Any

__all__ = ["CallTasks", "current_call"]

current_call: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "callrt_current_call", default=None
)
_registry: dict[str, weakref.WeakSet[asyncio.Task[Any]]] = {}


def _factory(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Task[Any]:
    task = asyncio.Task(coro, loop=loop, **kwargs)
    call_id = current_call.get()
    if call_id is not None and call_id in _registry:
        _registry[call_id].add(task)
    return task


class CallTasks:
    """Tracks the tasks started on behalf of one call (use as a context manager)."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> CallTasks:
        loop = asyncio.get_running_loop()
        if loop.get_task_factory() is None:
            loop.set_task_factory(_factory)  # type: ignore[arg-type]
        _registry[self.call_id] = weakref.WeakSet()
        self._token = current_call.set(self.call_id)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            current_call.reset(self._token)

    def pending(self) -> list[asyncio.Task[Any]]:
        me = asyncio.current_task()
        return [t for t in _registry.get(self.call_id, ()) if not t.done() and t is not me]

    async def drain(self, grace: float) -> int:
        """Wait up to ``grace`` for the call's tasks, then cancel the rest; returns how many."""
        try:
            pending = self.pending()
            if pending:
                await asyncio.wait(pending, timeout=grace)
            stragglers = self.pending()
            for t in stragglers:
                t.cancel()
            if stragglers:
                await asyncio.wait(stragglers, timeout=grace)
            return len(stragglers)
        finally:
            _registry.pop(self.call_id, None)
