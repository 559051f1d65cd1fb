"""Loading a local model's weights without blocking the event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger("agent.models")

__all__ = ["BackgroundLoad"]


class BackgroundLoad:
    """Gives a plugin a ``prewarm()`` that loads its weights in the executor.

    livekit calls ``prewarm()`` synchronously on the event loop when an activity
    starts; loading inline there would stall every call in the worker. The
    plugin provides ``load()`` (blocking, cached per process).
    """

    _prewarm_fut: asyncio.Future[object] | None = None
    load: Callable[[], object]

    def prewarm(self) -> None:
        """Start loading the weights in the executor (once); outside a loop, load now."""
        if self._prewarm_fut is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.load()
            return
        self._prewarm_fut = loop.run_in_executor(None, self.load)
        name = type(self).__name__
        self._prewarm_fut.add_done_callback(lambda fut: _log_failure(fut, name))


def _log_failure(fut: asyncio.Future[object], name: str) -> None:
    if not fut.cancelled() and (exc := fut.exception()) is not None:
        logger.error("loading model weights failed", extra={"model": name}, exc_info=exc)
