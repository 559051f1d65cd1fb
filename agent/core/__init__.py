"""The core: the message union and the actor kernel. Imports nothing else of ours.

- :mod:`~agent.core.messages`: every message type, in one discriminated union.
- :mod:`~agent.core.actor`: actors with urgent and data lanes, tell and ask, owned
  timers and tasks.
- :mod:`~agent.core.supervisor`: per-call scope and restart budgets.
- :mod:`~agent.core.bus`: the per-call bus.
- :mod:`~agent.core.clock`: the virtual clock.
- :mod:`~agent.core.tasks`: per-call task ownership.
"""

from agent.core.actor import Actor, ActorStopped, AskTimeout, MailboxFull
from agent.core.bus import ALL, Bus, SubscriberFailure, Subscription
from agent.core.clock import VirtualClockLoop, hold_clock, is_virtual, run
from agent.core.supervisor import CallScope, Escalation, RestartBudget

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
