"""Timer commands that pure policy cores return (the controller FSM, the AMD detector).

A policy core has no clock of its own: it returns these, and its actor carries
them out with the kernel's timers (:meth:`agent.core.actor.Actor.start_timer`).
One set of classes for every core, so a timer means the same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ArmTimer", "CancelTimer", "StartTimer"]


@dataclass(frozen=True)
class StartTimer:
    """Fire timer ``name`` ``seconds`` from now (restarting it if it runs)."""

    name: str
    seconds: float


@dataclass(frozen=True)
class ArmTimer:
    """Fire timer ``name`` at loop time ``at`` (restarting it if it runs)."""

    name: str
    at: float


@dataclass(frozen=True)
class CancelTimer:
    """Stop timer ``name``; nothing happens if it is not running."""

    name: str
