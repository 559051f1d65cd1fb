"""The per-call bus: publish/subscribe by message kind.

Publishers do not know who listens. A subscriber is either a plain callable
(called synchronously, in publish order) or an :class:`~agent.core.actor.Actor`
(the message is told to it without waiting).

Nothing a subscriber misses is silent: a callable that raises, or an actor
whose full data lane drops a message, is logged and recorded in
:attr:`Bus.failures`, which the call's result reports (a replay with a failure
is not ``ok``). Either way the subscriber stays subscribed and gets later
messages; a crashing actor is its supervisor's business. A subscriber never
breaks the publisher.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agent.core.actor import Actor, ActorStopped, MailboxFull

logger = logging.getLogger("agent.core")

__all__ = ["Bus", "Subscription", "SubscriberFailure", "ALL"]

ALL = "*"


@dataclass
class SubscriberFailure:
    """What one subscriber missed: its first failure and how many messages in all.

    Attributes:
        subscriber: the actor's name or the callable's qualified name.
        kind: the kind of the first message it missed.
        error: why (the exception type and message, or ``data lane full``).
        count: how many messages it missed.
    """

    subscriber: str
    kind: str
    error: str
    count: int = 1

    def describe(self) -> str:
        times = f" ({self.count} messages)" if self.count > 1 else ""
        return f"{self.subscriber} missed {self.kind!r}: {self.error}{times}"


def _name(target: Any) -> str:
    if isinstance(target, Actor):
        return f"actor {target.name}"
    return str(getattr(target, "__qualname__", None) or type(target).__qualname__)


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
        self._failures: dict[int, SubscriberFailure] = {}

    @property
    def failures(self) -> list[SubscriberFailure]:
        """Every subscriber that missed a message, in the order they first did."""
        return list(self._failures.values())

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
                        target.tell_nowait(msg)
                else:
                    target(msg)
            except ActorStopped:
                continue
            except MailboxFull:
                # the actor is backed up, not broken: it keeps its subscription
                # (and its urgent kinds still arrive), but the loss is reported
                self._failed(sub, kind, "data lane full; message dropped", None)
            except Exception as exc:
                self._failed(sub, kind, f"{type(exc).__name__}: {exc}"[:300], exc)

    def _failed(self, sub: Subscription, kind: str, error: str, exc: Exception | None) -> None:
        known = self._failures.get(id(sub))
        if known is not None:
            known.count += 1
            logger.debug(
                "bus subscriber failed again",
                extra={"call_id": self.call_id, "kind": kind, "subscriber": known.subscriber},
            )
            return
        failure = SubscriberFailure(_name(sub.target), kind, error)
        self._failures[id(sub)] = failure
        logger.error(
            "bus subscriber failed; the call's result will report it",
            extra={"call_id": self.call_id, "kind": kind, "subscriber": failure.subscriber},
            exc_info=exc,
        )
