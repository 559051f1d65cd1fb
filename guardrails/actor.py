"""GuardrailActor: answers the session's hook checks (skeleton).

The session's hooks ask this actor with a timeout: before a reply (the user
turn), for each agent sentence before it is spoken, and after each agent turn.
Until decision-model checks are configured, every check is answered ``allow``
and nothing is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent.messages import GuardrailCheck
from agent.runtime import Actor, Bus

__all__ = ["GuardrailActor", "CheckResult"]


@dataclass(frozen=True)
class CheckResult:
    """The reply to a :class:`~agent.messages.GuardrailCheck`."""

    action: Literal["allow", "block", "steer"] = "allow"
    say: str | None = None
    instructions: str | None = None


class GuardrailActor(Actor):
    """Answers hook checks; with no checks configured, always ``allow``."""

    def __init__(self, *, call_id: str, bus: Bus) -> None:
        super().__init__("guardrail")
        self.call_id = call_id
        self.bus = bus
        self.checks = 0

    async def receive(self, msg: Any) -> Any:
        match msg:
            case GuardrailCheck():
                self.checks += 1
                return CheckResult()
        raise TypeError(f"guardrail cannot handle {getattr(msg, 'kind', msg)!r}")
