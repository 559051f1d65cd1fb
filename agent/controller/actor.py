"""The call controller actor: carries out what the call's state machine decides.

:class:`CallControllerActor` receives bus messages, feeds them to
:class:`~agent.controller.fsm.ControllerFSM` (pure policy, in :mod:`agent.controller.fsm`)
and carries out the commands: timers, session commands (greet, say, press keys,
interrupt a run, transfer, hang up), guardian questions, ending the call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from agent.controller.fsm import (
    AskGuardian,
    CancelTimer,
    Command,
    ControllerFSM,
    ControllerPolicy,
    EndCall,
    Gate,
    Greet,
    HangUpLine,
    Interrupt,
    MessageLeft,
    PressKeys,
    Speak,
    StartTimer,
    Tools,
    TransferLine,
)
from agent.core import Actor, Bus
from agent.core.messages import (
    CallEnded,
    CallStateChanged,
    GenerateReply,
    GuardianQuestion,
    HangUp,
    InterruptRun,
    Say,
    SendDtmf,
    SetTools,
    TimerFired,
    Transfer,
    VoicemailLeft,
)

logger = logging.getLogger("agent.controller.actor")

__all__ = ["CallControllerActor"]


class CallControllerActor(Actor):
    """Thin actor around :class:`ControllerFSM`.

    Args:
        call_id: the call.
        bus: the call bus (it subscribes itself to what the FSM needs).
        policy: the policy.
        session: the session actor (told Greet and HangUp commands).
        on_end: called once with the final :class:`CallEnded`.
    """

    SUBSCRIBES = (
        "call_answered",
        "call_not_answered",
        "user_speech_started",
        "user_speech_stopped",
        "user_turn_completed",
        "agent_speech_started",
        "agent_turn_completed",
        "amd_prediction",
        "amd_completed",
        "amd_tone",
        "remote_hangup",
        "hang_up",
        "actor_crashed",
        "control_marker",
        "guardian_question",
        "call_transferred",
    )

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        policy: ControllerPolicy,
        session: Actor | None,
        on_end: Callable[[CallEnded], None],
        gate: Any = None,
        desk: Any = None,
        question_timeout: float = 60.0,
    ) -> None:
        super().__init__("controller")
        self.gate = gate
        self.desk = desk
        self.question_timeout = question_timeout
        self.call_id = call_id
        self.bus = bus
        self.fsm = ControllerFSM(policy)
        self.session = session
        self._on_end = on_end
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
                    self.start_timer(name, delay=seconds)
                case CancelTimer(name=name):
                    self.cancel_timer(name)
                case Greet(instructions=instr, opening=opening):
                    if self.gate is not None and opening:
                        self.gate.opening_in_flight = True
                        self.gate.opening_instructions = instr
                        self.gate.opening_run = None
                    run = await self._ask_session(
                        GenerateReply(
                            call_id=self.call_id,
                            at=loop.time(),
                            instructions=instr,
                            # AMD may decide before the callee's words are committed:
                            # that commit must not cut the opening (the callee's
                            # next speech still can)
                            protect=opening and self.fsm.policy.amd,
                            opening=opening,
                        )
                    )
                    if opening:
                        if self.gate is not None:
                            self.gate.opening_run = run
                            if run is None:
                                self.gate.opening_in_flight = False
                        self.fsm.spoke("opening", run)
                case Speak(text=text, tag=tag, interruptible=interruptible):
                    run = await self._ask_session(
                        Say(
                            call_id=self.call_id,
                            at=loop.time(),
                            text=text,
                            allow_interruptions=interruptible,
                        )
                    )
                    self.fsm.spoke(tag, run)
                case PressKeys(digits=digits):
                    await self._ask_session(
                        SendDtmf(call_id=self.call_id, at=loop.time(), digits=digits)
                    )
                case Interrupt(run_id=run_id):
                    if self.session is not None and not self.session.stopped:
                        await self.session.tell(
                            InterruptRun(call_id=self.call_id, at=loop.time(), run_id=run_id)
                        )
                case Gate(open=is_open):
                    if self.gate is not None:
                        self.gate.open = is_open
                        if is_open or self.fsm.opening_run is None:
                            self.gate.opening_in_flight = self.fsm.opening_run is not None
                case Tools(end_call=end_call, send_dtmf=send_dtmf):
                    await self._ask_session(
                        SetTools(
                            call_id=self.call_id,
                            at=loop.time(),
                            end_call=end_call,
                            send_dtmf=send_dtmf,
                        )
                    )
                case TransferLine(target=target, destination=destination):
                    await self._transfer(target, destination)
                case AskGuardian(question=question):
                    self.spawn(self._ask_guardian(question), name="controller:guardian")
                case MessageLeft(run_id=run_id):
                    self.bus.publish(
                        VoicemailLeft(call_id=self.call_id, at=loop.time(), run_id=run_id)
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

    async def _ask_session(self, msg: Any) -> Any:
        """Ask the session (its answer, e.g. a run id), or None when it cannot answer."""
        if self.session is None or self.session.stopped:
            return None
        try:
            return await self.session.ask(msg, timeout=10.0)
        except Exception:
            logger.warning(
                "session command failed",
                extra={"call_id": self.call_id, "command": msg.kind},
                exc_info=True,
            )
            return None

    async def _transfer(self, target: str, destination: str) -> None:
        ok = False
        if self.session is not None and not self.session.stopped:
            try:
                ok = bool(
                    await self.session.ask(
                        Transfer(
                            call_id=self.call_id,
                            at=asyncio.get_running_loop().time(),
                            target=target,
                            destination=destination,
                        ),
                        timeout=30.0,
                    )
                )
            except Exception:
                logger.warning("transfer failed", extra={"call_id": self.call_id}, exc_info=True)
        if not ok:
            old = self.fsm.state
            await self._apply(self.fsm.transfer_failed(), old)

    async def _ask_guardian(self, question: str) -> None:
        """Ask the guardian through the desk; the answer (or None) comes back on the bus."""
        loop = asyncio.get_running_loop()
        answer: str | None = None
        status = "timed_out"
        qid = "q_none"
        try:
            if self.desk is not None:
                q = self.desk.ask(self.call_id, question)
                qid = q.id
                self.bus.publish(
                    GuardianQuestion(
                        call_id=self.call_id,
                        at=loop.time(),
                        question_id=qid,
                        status="pending",
                        question=question,
                    )
                )
                answer = await self.desk.wait(qid, self.question_timeout)
                status = "answered" if answer is not None else "timed_out"
        except Exception:
            logger.warning("guardian question failed", extra={"call_id": self.call_id})
        self.bus.publish(
            GuardianQuestion(
                call_id=self.call_id,
                at=loop.time(),
                question_id=qid,
                status=status,  # type: ignore[arg-type]
                question=question,
                answer=answer,
            )
        )

    def timer_message(self, name: str, at: float) -> TimerFired:
        return TimerFired(call_id=self.call_id, at=at, name=name)

    async def on_restart(self, error: BaseException, timers: Mapping[str, float]) -> None:
        # The FSM survived the crash (it is pure; the crash was in carrying out its
        # commands), so every timer it armed is still owed, max_call above all.
        for name, when in timers.items():
            self.start_timer(name, at=when)
        logger.warning(
            "controller restarted; timers re-armed",
            extra={"call_id": self.call_id, "timers": sorted(timers)},
        )

    async def on_stop(self) -> None:
        if self.desk is not None:
            remote = getattr(self.desk, "acancel_call", None)
            if remote is not None:
                await remote(self.call_id)
            else:
                self.desk.cancel_call(self.call_id)
