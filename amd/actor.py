"""AmdActor: the call's answering-machine detector (skeleton).

It listens to the call from the answer on and will classify every callee turn
with rolling history. Until the detector lands it observes only and never
publishes a prediction, so the call result reports no AMD decision.
"""

from __future__ import annotations

from typing import Any

from agent.runtime import Actor, Bus

__all__ = ["AmdActor"]


class AmdActor(Actor):
    """Subscribes to the callee's turns; publishes ``AmdPrediction`` messages once implemented."""

    SUBSCRIBES = ("call_answered", "user_turn_completed", "dtmf_sent", "agent_turn_completed")

    def __init__(self, *, call_id: str, bus: Bus) -> None:
        super().__init__("amd")
        self.call_id = call_id
        self.bus = bus
        self.answered_at: float | None = None
        self.turns_seen = 0
        bus.subscribe(self.SUBSCRIBES, self)

    async def receive(self, msg: Any) -> Any:
        match msg.kind:
            case "call_answered":
                self.answered_at = msg.at
            case "user_turn_completed":
                self.turns_seen += 1
        return None
