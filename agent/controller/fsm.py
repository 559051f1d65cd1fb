"""The call's state machine: pure policy, no asyncio and no I/O.

:class:`ControllerFSM` takes one event at a time (a bus message or a timer) and
returns the commands to carry out; :class:`~agent.controller.actor.CallControllerActor`
carries them out. States: ``dialing`` -> ``listening`` (outbound: waiting for the
callee's first words, or for AMD) -> ``conversing`` -> ``ended``, plus the AMD
states (``screening``, ``ivr``, ``voicemail``, ``leaving_message``,
``after_message``) and the control-marker states (``holding`` for a guardian
question, ``transferring``). Inbound calls go from ``dialing`` straight to
``conversing`` and greet first. Ending commands (hang up the line, then end the
call) are issued in the same step that enters ``ended``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.core.messages import (
    ActorCrashed,
    AgentSpeechStarted,
    AgentTurnCompleted,
    AmdCompleted,
    AmdPrediction,
    AmdTone,
    CallAnswered,
    CallNotAnswered,
    CallTransferred,
    ControlMarkerSeen,
    Direction,
    Disposition,
    GuardianQuestion,
    HangUp,
    RemoteHangup,
    TimerFired,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
)
from agent.core.timers import CancelTimer, StartTimer

__all__ = [
    "ControllerPolicy",
    "ControllerFSM",
    "Command",
    "Greet",
    "StartTimer",
    "CancelTimer",
    "HangUpLine",
    "EndCall",
    "Speak",
    "PressKeys",
    "Interrupt",
    "Gate",
    "Tools",
    "MessageLeft",
    "TransferLine",
    "AskGuardian",
    "MACHINE_STATES",
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
    #: Answering-machine detection drives outbound calls (inbound calls never use it).
    amd: bool = False
    screening_reply: str = "Hi, this is Sam from Acme, calling about your appointment."
    voicemail_message: str = "Hi, this is Sam from Acme. Please call us back. Thank you."
    ivr_goal: str = ""
    ivr_instructions: str = (
        "You have reached an automated phone menu, not a person. Your goal: {goal}. "
        "Press keys with the send_dtmf tool, or say the option you need in a few words."
    )
    uncertain_action: str = "human"  # human | hangup
    machine_reply_silence: float = 1.5
    vm_silence_without_beep: float = 1.5
    beep_gap: float = 0.15
    post_message_wait: float = 10.0
    max_ivr_attempts: int = 3
    ivr_fallback: str = "wait"  # wait | llm
    max_screening_replies: int = 2
    #: [TRANSFER:name] targets: name -> number or SIP URI
    transfer_targets: tuple[tuple[str, str], ...] = ()
    #: whether [ASK_GUARDIAN:...] reaches a guardian (a desk and a guardian are configured)
    guardian: bool = False
    hold_message: str = "One moment please, I'm checking on that for you."
    answer_instructions: str = (
        "The person you checked with answered: {answer}. Tell the caller in one or two "
        "short sentences."
    )
    no_answer_instructions: str = (
        "You could not get an answer right now. Tell the caller briefly and offer to "
        "follow up later."
    )


# -- commands ------------------------------------------------------------------


@dataclass(frozen=True)
class Greet:
    instructions: str
    opening: bool = True


@dataclass(frozen=True)
class HangUpLine:
    reason: str
    graceful: bool = False


@dataclass(frozen=True)
class EndCall:
    disposition: Disposition
    reason: str


@dataclass(frozen=True)
class Speak:
    """Say a fixed text; the actor reports the run id back with :meth:`ControllerFSM.spoke`."""

    text: str
    tag: str
    interruptible: bool = True


@dataclass(frozen=True)
class PressKeys:
    digits: str


@dataclass(frozen=True)
class Interrupt:
    run_id: str


@dataclass(frozen=True)
class Gate:
    """Open or close the session's automatic replies."""

    open: bool


@dataclass(frozen=True)
class Tools:
    end_call: bool
    send_dtmf: bool = False


@dataclass(frozen=True)
class MessageLeft:
    run_id: str


@dataclass(frozen=True)
class TransferLine:
    target: str
    destination: str


@dataclass(frozen=True)
class AskGuardian:
    question: str


Command = (
    Greet
    | StartTimer
    | CancelTimer
    | HangUpLine
    | EndCall
    | Speak
    | PressKeys
    | Interrupt
    | Gate
    | Tools
    | MessageLeft
    | TransferLine
    | AskGuardian
)

#: Controller states while AMD says the far end is a machine.
MACHINE_STATES = frozenset({"screening", "ivr", "voicemail", "leaving_message", "after_message"})


class ControllerFSM:
    """The call's state machine. Feed it events; it returns commands.

    States: ``dialing``, ``listening`` (AMD has not decided), ``conversing``
    (a person), ``screening``, ``ivr``, ``voicemail`` (waiting for the beep),
    ``leaving_message``, ``after_message`` (waiting for a post-message menu),
    ``holding`` (the caller waits for the guardian's answer), ``transferring``,
    ``ended``.
    """

    def __init__(self, policy: ControllerPolicy) -> None:
        self.policy = policy
        self.state = "dialing"
        self.answered = False
        self.callee_spoke = False
        self.agent_turns = 0
        self.disposition: Disposition | None = None
        # callee speech, for "wait for silence" rules
        self.callee_speaking = False
        self.last_speech_stop: float | None = None
        self.last_speech_start: float | None = None
        self.now = 0.0
        # AMD-driven state
        self.pending: str | None = None  # the machine-stage reply waiting for silence
        self.menu_text: list[str] = []
        self.ivr_attempts = 0
        self.screening_replies = 0
        self.beep_end: float | None = None
        self.speaking_run: str | None = None
        self.opening_run: str | None = None
        self.runs: dict[str, str] = {}  # run id -> tag
        self.voicemail_left = False

    def _goto(self, state: str) -> None:
        self.state = state

    def on_event(self, ev: Any) -> list[Command]:
        """Advance on one event (a bus message or :class:`TimerFired`)."""
        if self.state == "ended":
            return []
        at = getattr(ev, "at", None)
        if isinstance(at, float):
            self.now = max(self.now, at)
        match ev:
            case CallAnswered():
                self.answered = True
                cmds: list[Command] = [StartTimer("max_call", self.policy.max_call_seconds)]
                if self.policy.direction == "inbound":
                    self._goto("conversing")
                    return [*cmds, Greet(self.policy.inbound_greeting_instructions)]
                self._goto("listening")
                if self.policy.amd:
                    # AMD decides who answered; until then nothing is said and the
                    # LLM cannot end the call
                    return [*cmds, Gate(False), Tools(end_call=False)]
                return [*cmds, StartTimer("greet", self.policy.greet_after_silence)]
            case CallNotAnswered(status=status):
                return self._end(UNANSWERED.get(status, "failed"), f"not answered: {status}")
            case UserSpeechStarted():
                self.callee_speaking = True
                self.last_speech_start = ev.at
                if self.state == "listening":
                    self.callee_spoke = True
                    return [CancelTimer("greet")]
                if self.state in ("screening", "ivr", "after_message") and self.pending:
                    return [CancelTimer("machine_reply")]
                if self.state == "voicemail":
                    return [CancelTimer("vm_message")]
                return []
            case UserSpeechStopped():
                self.callee_speaking = False
                self.last_speech_stop = ev.at
                if self.state == "listening" and not self.policy.amd:
                    # speech (or noise) that produced no turn: keep waiting, then greet
                    return [StartTimer("greet", self.policy.greet_after_silence)]
                if self.state in ("screening", "ivr", "after_message") and self.pending:
                    return [StartTimer("machine_reply", self.policy.machine_reply_silence)]
                if self.state == "voicemail":
                    return [StartTimer("vm_message", self.policy.vm_silence_without_beep)]
                return []
            case UserTurnCompleted() if self.state == "listening" and not self.policy.amd:
                # the session replies to the callee's first words: that reply is the greeting
                self.callee_spoke = True
                self._goto("conversing")
                return [CancelTimer("greet")]
            case UserTurnCompleted(text=text) if self.state == "after_message":
                # AMD is done once the message is left: a post-message menu is read here
                self.callee_spoke = True
                self.menu_text.append(text)
                return self._wait_silence_then("ivr")
            case UserTurnCompleted():
                self.callee_spoke = True
                return []
            case AgentSpeechStarted(run_id=run_id):
                self.speaking_run = run_id
                return []
            case AgentTurnCompleted(run_id=run_id, interrupted=interrupted):
                self.agent_turns += 1
                if self.speaking_run == run_id:
                    self.speaking_run = None
                return self._agent_turn_done(run_id, interrupted)
            case ControlMarkerSeen():
                return self._on_marker(ev)
            case GuardianQuestion(status=status, answer=answer) if status != "pending":
                return self._guardian_answered(answer if status == "answered" else None)
            case CallTransferred(target=target):
                return self._end("transferred", f"transferred to {target}")
            case AmdPrediction():
                return self._on_amd(ev)
            case AmdCompleted(category=category, reason=reason):
                return self._on_amd_completed(category, reason)
            case AmdTone(tone="beep", end=end):
                return self._on_beep(end)
            case TimerFired(name="greet") if self.state == "listening":
                self._goto("conversing")
                return [Greet(self.policy.opening_instructions)]
            case TimerFired(name="machine_reply"):
                return self._machine_reply()
            case TimerFired(name="vm_message") if self.state == "voicemail":
                self._goto("leaving_message")
                return [Speak(self.policy.voicemail_message, tag="voicemail", interruptible=False)]
            case TimerFired(name="post_message") if self.state == "after_message":
                return [HangUpLine("voicemail left"), *self._end("voicemail", "voicemail left")]
            case TimerFired(name="max_call"):
                return [
                    HangUpLine("max call duration"),
                    *self._end(self._ended_disposition(), "max call duration"),
                ]
            case ActorCrashed(actor=actor):
                return self.fail(f"actor {actor} failed")
            case RemoteHangup():
                if not self.answered:
                    return self._end("failed", "callee hung up")
                return self._end(self._ended_disposition(), "callee hung up")
            case HangUp(reason=reason, graceful=graceful):
                return [HangUpLine(reason, graceful), *self._end(self._ended_disposition(), reason)]
        return []

    def spoke(self, tag: str, run_id: str | None) -> list[Command]:
        """The session created run ``run_id`` for a :class:`Speak` or opening :class:`Greet`."""
        if run_id is None:
            return []
        self.runs[run_id] = tag
        if tag == "opening":
            self.opening_run = run_id
        return []

    # -- control markers -------------------------------------------------------

    def _on_marker(self, ev: ControlMarkerSeen) -> list[Command]:
        if self.state in ("transferring", "dialing"):
            return []
        match ev.marker:
            case "end_call":
                return [
                    HangUpLine("agent ended the call", graceful=True),
                    *self._end(self._ended_disposition(), "agent ended the call"),
                ]
            case "transfer":
                name = (ev.arg or "").strip().lower()
                targets = dict(self.policy.transfer_targets)
                if name in targets:
                    self._goto("transferring")
                    return [Gate(False), TransferLine(name, targets[name])]
                known = ", ".join(targets) or "none"
                return [
                    Greet(
                        f"There is no transfer target named {ev.arg!r} (you can transfer to: "
                        f"{known}). Do not transfer; keep helping the caller.",
                        opening=False,
                    )
                ]
            case "ask_guardian" if self.state == "conversing":
                if not self.policy.guardian:
                    return [Greet(self.policy.no_answer_instructions, opening=False)]
                self._goto("holding")
                return [
                    Gate(False),
                    Speak(self.policy.hold_message, tag="hold"),
                    AskGuardian(ev.arg or ""),
                ]
        return []

    def _guardian_answered(self, answer: str | None) -> list[Command]:
        if self.state != "holding":
            return []
        self._goto("conversing")
        if answer is None:
            instructions = self.policy.no_answer_instructions
        else:
            instructions = self.policy.answer_instructions.replace("{answer}", answer)
        return [Gate(True), Greet(instructions, opening=False)]

    def transfer_failed(self) -> list[Command]:
        """The line could not transfer: back to the conversation."""
        if self.state != "transferring":
            return []
        self._goto("conversing")
        return [
            Gate(True),
            Greet(
                "The transfer did not go through. Apologise briefly and keep helping the caller.",
                opening=False,
            ),
        ]

    # -- AMD -------------------------------------------------------------------

    def _ended_disposition(self) -> Disposition:
        if self.voicemail_left:
            return "voicemail"
        return "completed"

    def _start_conversation(self, instructions: str | None = None) -> list[Command]:
        self._goto("conversing")
        self.pending = None
        return [
            CancelTimer("machine_reply"),
            CancelTimer("vm_message"),
            Tools(end_call=True, send_dtmf=False),
            Gate(True),
            Greet(instructions or self.policy.opening_instructions),
        ]

    def _on_amd(self, p: AmdPrediction) -> list[Command]:
        if not self.policy.amd or self.state in ("dialing", "ended"):
            return []
        stage = p.stage
        if stage == "human":
            if self.state in ("listening", *MACHINE_STATES) and self.state not in (
                "leaving_message",
                "after_message",
            ):
                return self._start_conversation()
            return []
        if stage == "uncertain":
            if self.state == "conversing" and p.changed:
                # the "person" was a sound without words: listen again
                self._goto("listening")
                cmds: list[Command] = [Gate(False), Tools(end_call=False)]
                for run in dict.fromkeys([self.speaking_run, self.opening_run]):
                    if run is not None:
                        cmds.append(Interrupt(run))
                return cmds
            return []
        if stage == "machine-unavailable":
            return [HangUpLine("unavailable"), *self._end("unavailable", p.reason or "unavailable")]
        cmds = []
        if self.state == "conversing" and p.changed:
            # a provisional "person" was a recording: stop talking, follow the machine
            cmds += [Gate(False), Tools(end_call=False)]
            # stop what is playing, and the opening if it has not started yet
            for run in dict.fromkeys([self.speaking_run, self.opening_run]):
                if run is not None:
                    cmds.append(Interrupt(run))
        elif self.state == "conversing":
            return []
        if stage == "machine-screening":
            if self.state not in ("listening", "screening", "conversing"):
                return cmds
            self._goto("screening")
            if p.asks and p.category == "machine-screening":
                if self.screening_replies < self.policy.max_screening_replies:
                    return [*cmds, *self._wait_silence_then("screening")]
            return cmds
        if stage == "machine-ivr":
            if self.state in ("leaving_message",):
                return cmds
            if self.state != "after_message":
                self._goto("ivr")
            if p.transcript:
                self.menu_text.append(p.transcript)
            if p.category == "machine-ivr" or p.asks:
                return [*cmds, *self._wait_silence_then("ivr")]
            return cmds
        if stage == "machine-vm":
            if self.state in ("leaving_message", "after_message"):
                return cmds
            if self.state != "voicemail":
                self._goto("voicemail")
                self.pending = None
                cmds.append(CancelTimer("machine_reply"))
                if "beep" in p.evidence and self.beep_end is None:
                    self.beep_end = self.now
                cmds += self._schedule_message()
            return cmds
        return cmds

    def _schedule_message(self) -> list[Command]:
        """In ``voicemail``: after the beep (plus a gap), or after silence when there is none."""
        heard_beep = self.beep_end is not None and (
            self.last_speech_start is None or self.beep_end >= self.last_speech_start
        )
        if heard_beep:
            assert self.beep_end is not None
            return [
                StartTimer("vm_message", max(0.0, self.beep_end + self.policy.beep_gap - self.now))
            ]
        if self.callee_speaking:
            return []  # the greeting goes on; its end arms the timer
        since = self.now - self.last_speech_stop if self.last_speech_stop is not None else 0.0
        return [StartTimer("vm_message", max(0.0, self.policy.vm_silence_without_beep - since))]

    def _on_beep(self, end: float) -> list[Command]:
        self.beep_end = end
        if self.state == "voicemail":
            return [StartTimer("vm_message", max(0.0, end + self.policy.beep_gap - self.now))]
        if self.state == "leaving_message":
            # a late beep cut into the message: start it again after the beep
            run = next((r for r, tag in self.runs.items() if tag == "voicemail"), None)
            self._goto("voicemail")
            cmds: list[Command] = [
                StartTimer("vm_message", max(0.0, end + self.policy.beep_gap - self.now))
            ]
            if run is not None:
                self.runs.pop(run, None)
                cmds.insert(0, Interrupt(run))
            return cmds
        return []

    def _wait_silence_then(self, action: str) -> list[Command]:
        self.pending = action
        if self.callee_speaking:
            return []
        since = self.now - self.last_speech_stop if self.last_speech_stop is not None else 0.0
        return [StartTimer("machine_reply", max(0.0, self.policy.machine_reply_silence - since))]

    def _machine_reply(self) -> list[Command]:
        action, self.pending = self.pending, None
        if action == "screening" and self.state == "screening":
            self.screening_replies += 1
            return [Speak(self.policy.screening_reply, tag="screening")]
        if action == "ivr" and self.state in ("ivr", "after_message"):
            from amd.ivr import PERSON_GOAL, SEND_GOAL, choose_option, menu_options

            text = " ".join(self.menu_text)
            goal = SEND_GOAL if self.state == "after_message" else self.policy.ivr_goal
            fallbacks = () if self.state == "after_message" else (PERSON_GOAL, "english")
            digit = choose_option(menu_options(text), goal, fallbacks=fallbacks) if text else None
            if self.state == "after_message":
                if digit is None:
                    return []
                self.menu_text = []
                return [PressKeys(digit), StartTimer("post_message", self.policy.post_message_wait)]
            self.ivr_attempts += 1
            if self.ivr_attempts > self.policy.max_ivr_attempts:
                return []  # the menu keeps coming back: stop answering it
            if digit is not None:
                self.menu_text = []
                return [PressKeys(digit)]
            if (
                self.ivr_attempts > self.policy.max_ivr_attempts
                or self.policy.ivr_fallback != "llm"
            ):
                return []
            goal_text = self.policy.ivr_goal or "reach a person"
            return [
                Tools(end_call=False, send_dtmf=True),
                Greet(self.policy.ivr_instructions.format(goal=goal_text), opening=False),
            ]
        return []

    def _agent_turn_done(self, run_id: str, interrupted: bool) -> list[Command]:
        tag = self.runs.pop(run_id, None)
        cmds: list[Command] = []
        if run_id == self.opening_run:
            self.opening_run = None
            cmds.append(Gate(self.state == "conversing"))
        if tag == "voicemail" and self.state == "leaving_message":
            if interrupted:
                self._goto("voicemail")
                return [*cmds, *self._schedule_message()]
            self.voicemail_left = True
            self._goto("after_message")
            self.menu_text = []
            return [
                *cmds,
                MessageLeft(run_id),
                StartTimer("post_message", self.policy.post_message_wait),
            ]
        return cmds

    def _on_amd_completed(self, category: str, reason: str) -> list[Command]:
        if not self.policy.amd:
            return []
        if category == "uncertain" and self.state == "listening":
            if self.policy.uncertain_action == "hangup":
                return [HangUpLine("amd uncertain"), *self._end("completed", "amd uncertain")]
            return self._start_conversation()
        if reason == "hard timeout":
            if self.state == "voicemail":
                self._goto("leaving_message")
                return [Speak(self.policy.voicemail_message, tag="voicemail", interruptible=False)]
            if self.state in ("screening", "ivr"):
                return [HangUpLine("amd hard timeout"), *self._end("completed", "amd hard timeout")]
        return []

    def fail(self, reason: str) -> list[Command]:
        """The runtime failed (an actor escalated): end with disposition ``error``."""
        if self.state == "ended":
            return []
        return [HangUpLine(reason), *self._end("error", reason)]

    def _end(self, disposition: Disposition, reason: str) -> list[Command]:
        self.disposition = disposition
        self._goto("ended")
        return [
            CancelTimer("greet"),
            CancelTimer("max_call"),
            CancelTimer("machine_reply"),
            CancelTimer("vm_message"),
            CancelTimer("post_message"),
            EndCall(disposition, reason),
        ]
