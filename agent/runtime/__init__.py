"""Actor kernel: actors with urgent and data lanes, supervision, a per-call bus, a virtual clock."""

from .actor import Actor, ActorStopped, AskTimeout, MailboxFull
from .bus import ALL, Bus, SubscriberFailure, Subscription
from .clock import VirtualClockLoop, hold_clock, is_virtual, run
from .supervisor import CallScope, Escalation, RestartBudget

__all__ = [
    "ALL",
    "Actor",
    "ActorStopped",
    "AskTimeout",
    "Bus",
    "CallScope",
    "Escalation",
    "MailboxFull",
    "RestartBudget",
    "SubscriberFailure",
    "Subscription",
    "VirtualClockLoop",
    "hold_clock",
    "is_virtual",
    "run",
]
