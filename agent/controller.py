"""The call controller: the call's state machine (pure) and its actor (thin).

:class:`ControllerFSM` has no asyncio and no I/O: it takes one event at a time
and returns the commands to carry out. :class:`CallControllerActor` receives
bus messages, feeds them to the FSM and carries out the commands (timers,
session commands, ending the call). Later policy (AMD, voicemail, IVR keys,
guardrail actions) adds states and transitions here.

States: ``dialing`` -> ``listening`` (outbound: waiting for the callee's first
words) -> ``conversing`` -> ``ended``. Inbound calls go from ``dialing``
straight to ``conversing`` and greet first. Ending commands (hang up the line,
then end the call) are issued in the same step that enters ``ended``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .messages import (
    URGENT_KINDS,
    ActorCrashed,
    AgentTurnCompleted,
    CallAnswered,
    CallEnded,
    CallNotAnswered,
    CallStateChanged,
    Direction,
    Disposition,
    GenerateReply,
    HangUp,
    RemoteHangup,
    TimerFired,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
)
from .runtime import Actor, Bus

logger = logging.getLogger("agent.controller")

__all__ = [
    "ControllerPolicy",
    "ControllerFSM",
    "CallControllerActor",
    "Greet",
    "StartTimer",
    "CancelTimer",
    "HangUpLine",
    "EndCall",
]

UNANSWERED: dict[str, Disposition] = {
    "busy": "busy",
    "no-answer": "no-answer",
    "failed": "failed",
    "rejected": "rejected",
}


@dataclass(frozen=True)
class ControllerPolicy:
    """What the controller does, from the agent config."""

    direction: Direction = "outbound"
    greet_after_silence: float = 2.0
    max_call_seconds: float = 300.0
    opening_instructions: str = (
        "Greet the person briefly, say who you are and why you are calling, "
        "and ask one short question."
    )
    inbound_greeting_instructions: str = "Greet the caller briefly and ask how you can help."


# -- commands ------------------------------------------------------------------


@dataclass(frozen=True)
class Greet:
    instructions: str


@dataclass(frozen=True)
class StartTimer:
    name: str
    seconds: float


@dataclass(frozen=True)
class CancelTimer:
    name: str


@dataclass(frozen=True)
class HangUpLine:
    reason: str
    graceful: bool = False


@dataclass(frozen=True)
class EndCall:
    disposition: Disposition
    reason: str


Command = Greet | StartTimer | CancelTimer | HangUpLine | EndCall


class ControllerFSM:
    """The call's state machine. Feed it events; it returns commands."""

    def __init__(self, policy: ControllerPolicy) -> None:
        self.policy = policy
        self.state = "dialing"
        self.answered = False
        self.callee_spoke = False
        self.agent_turns = 0
        self.disposition: Disposition | None = None

    def _goto(self, state: str) -> None:
        self.state = state

    def on_event(self, ev: Any) -> list[Command]:
        """Advance on one event (a bus message or :class:`TimerFired`)."""
        if self.state == "ended":
            return []
        match ev:
            case CallAnswered():
                self.answered = True
                cmds: list[Command] = [StartTimer("max_call", self.policy.max_call_seconds)]
                if self.policy.direction == "inbound":
                    self._goto("conversing")
                    return [*cmds, Greet(self.policy.inbound_greeting_instructions)]
                self._goto("listening")
                return [*cmds, StartTimer("greet", self.policy.greet_after_silence)]
            case CallNotAnswered(status=status):
                return self._end(UNANSWERED.get(status, "failed"), f"not answered: {status}")
            case UserSpeechStarted() if self.state == "listening":
                self.callee_spoke = True
                return [CancelTimer("greet")]
            case UserSpeechStopped() if self.state == "listening":
                # speech (or noise) that produced no turn: keep waiting, then greet
                return [StartTimer("greet", self.policy.greet_after_silence)]
            case UserTurnCompleted() if self.state == "listening":
                # the session replies to the callee's first words: that reply is the greeting
                self.callee_spoke = True
                self._goto("conversing")
                return [CancelTimer("greet")]
            case UserTurnCompleted():
                self.callee_spoke = True
                return []
            case AgentTurnCompleted():
                self.agent_turns += 1
                return []
            case TimerFired(name="greet") if self.state == "listening":
                self._goto("conversing")
                return [Greet(self.policy.opening_instructions)]
            case TimerFired(name="max_call"):
                return [
                    HangUpLine("max call duration"),
                    *self._end("completed", "max call duration"),
                ]
            case ActorCrashed(actor=actor):
                return self.fail(f"actor {actor} failed")
            case RemoteHangup():
                return self._end("completed" if self.answered else "failed", "callee hung up")
            case HangUp(reason=reason, graceful=graceful):
                return [HangUpLine(reason, graceful), *self._end("completed", reason)]
        return []

    def fail(self, reason: str) -> list[Command]:
        """The runtime failed (an actor escalated): end with disposition ``error``."""
        if self.state == "ended":
            return []
        return [HangUpLine(reason), *self._end("error", reason)]

    def _end(self, disposition: Disposition, reason: str) -> list[Command]:
        self.disposition = disposition
        self._goto("ended")
        return [CancelTimer("greet"), CancelTimer("max_call"), EndCall(disposition, reason)]


class CallControllerActor(Actor):
    """Thin actor around :class:`ControllerFSM`.

    Args:
        call_id: the call.
        bus: the call bus (it subscribes itself to what the FSM needs).
        policy: the policy.
        session: the session actor (told Greet and HangUp commands).
        on_end: called once with the final :class:`CallEnded`.
    """

    urgent_kinds = URGENT_KINDS
    SUBSCRIBES = (
        "call_answered",
        "call_not_answered",
        "user_speech_started",
        "user_speech_stopped",
        "user_turn_completed",
        "agent_turn_completed",
        "remote_hangup",
        "hang_up",
        "actor_crashed",
    )

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        policy: ControllerPolicy,
        session: Actor | None,
        on_end: Callable[[CallEnded], None],
    ) -> None:
        super().__init__("controller")
        self.call_id = call_id
        self.bus = bus
        self.fsm = ControllerFSM(policy)
        self.session = session
        self._on_end = on_end
        self._timers: dict[str, asyncio.TimerHandle] = {}
        bus.subscribe(self.SUBSCRIBES, self)

    async def receive(self, msg: Any) -> Any:
        old = self.fsm.state
        cmds = self.fsm.on_event(msg)
        await self._apply(cmds, old)

    async def fail(self, reason: str) -> None:
        """End the call with disposition ``error`` (called on escalation)."""
        old = self.fsm.state
        await self._apply(self.fsm.fail(reason), old)

    async def _apply(self, cmds: list[Command], old_state: str) -> None:
        loop = asyncio.get_running_loop()
        if self.fsm.state != old_state:
            self.bus.publish(
                CallStateChanged(
                    call_id=self.call_id, at=loop.time(), old=old_state, new=self.fsm.state
                )
            )
        for cmd in cmds:
            match cmd:
                case StartTimer(name=name, seconds=seconds):
                    self._cancel(name)
                    self._timers[name] = loop.call_later(seconds, self._fire, name)
                case CancelTimer(name=name):
                    self._cancel(name)
                case Greet(instructions=instr):
                    if self.session is not None:
                        await self.session.tell(
                            GenerateReply(call_id=self.call_id, at=loop.time(), instructions=instr)
                        )
                case HangUpLine(reason=reason, graceful=graceful):
                    if self.session is not None and not self.session.stopped:
                        try:
                            await self.session.ask(
                                HangUp(
                                    call_id=self.call_id,
                                    at=loop.time(),
                                    reason=reason,
                                    graceful=graceful,
                                ),
                                timeout=20.0,
                            )
                        except Exception:
                            logger.warning("hang-up failed", extra={"call_id": self.call_id})
                case EndCall(disposition=disp, reason=reason):
                    ended = CallEnded(
                        call_id=self.call_id, at=loop.time(), disposition=disp, reason=reason
                    )
                    self.bus.publish(ended)
                    self._on_end(ended)

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        if not self.stopped:
            self.tell_nowait(
                TimerFired(call_id=self.call_id, at=asyncio.get_running_loop().time(), name=name)
            )

    def _cancel(self, name: str) -> None:
        handle = self._timers.pop(name, None)
        if handle is not None:
            handle.cancel()

    async def on_stop(self) -> None:
        for name in list(self._timers):
            self._cancel(name)
