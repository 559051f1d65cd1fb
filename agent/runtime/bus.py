"""The per-call bus: publish/subscribe by message kind.

Publishers do not know who listens. A subscriber is either a plain callable
(called synchronously, in publish order) or an :class:`~agent.runtime.actor.Actor`
(the message is told to it without waiting; if its data lane is full the message
is dropped for it and logged). A subscriber that raises is logged and
unsubscribed; it never breaks the publisher.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from .actor import Actor, ActorStopped, MailboxFull

logger = logging.getLogger("agent.runtime")

__all__ = ["Bus", "Subscription", "ALL"]

ALL = "*"


class Subscription:
    """A handle to cancel one subscription."""

    def __init__(self, bus: Bus, kinds: tuple[str, ...], target: Any) -> None:
        self._bus = bus
        self.kinds = kinds
        self.target = target

    def cancel(self) -> None:
        self._bus._remove(self)


class Bus:
    """Fan-out of messages to the subscribers of their ``kind``."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self._subs: dict[str, list[Subscription]] = {}
        self.published = 0

    def subscribe(
        self, kinds: str | Iterable[str], target: Callable[[Any], Any] | Actor
    ) -> Subscription:
        """Subscribe a callable or an actor to message kinds (``"*"`` for every kind)."""
        ks = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        sub = Subscription(self, ks, target)
        for k in ks:
            self._subs.setdefault(k, []).append(sub)
        return sub

    def _remove(self, sub: Subscription) -> None:
        for k in sub.kinds:
            lst = self._subs.get(k)
            if lst and sub in lst:
                lst.remove(sub)

    def publish(self, msg: Any) -> None:
        """Deliver ``msg`` to every subscriber of its kind and of ``"*"``."""
        self.published += 1
        kind = msg.kind
        for sub in [*self._subs.get(kind, ()), *self._subs.get(ALL, ())]:
            target = sub.target
            try:
                if isinstance(target, Actor):
                    if not target.stopped:
                        self._tell(target, msg)
                else:
                    target(msg)
            except ActorStopped:
                continue
            except Exception:
                logger.exception(
                    "bus subscriber failed; unsubscribing it",
                    extra={"call_id": self.call_id, "kind": kind},
                )
                sub.cancel()

    def _tell(self, actor: Actor, msg: Any) -> None:
        try:
            actor.tell_nowait(msg)
        except MailboxFull:
            # The actor is backed up, not broken: it misses this message but
            # keeps its subscription (and its urgent kinds still arrive).
            logger.warning(
                "bus subscriber's data lane is full; message dropped",
                extra={"call_id": self.call_id, "kind": msg.kind, "actor": actor.name},
            )
