"""The composition root: builds one call's four actors and runs them.

Only this module knows all four actors (session, AMD, guardrail, controller).
A call runs in one :class:`~agent.core.CallScope`; when the controller ends
the call (or an actor escalates, or the replay's time bound passes), every actor
is stopped and nothing of the call is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from livekit.agents import llm, stt, tts, vad
from livekit.agents.llm import DecisionModel

from agent.app.config import AgentConfig
from agent.app.guarding import GuardrailFactory, GuardrailHooks
from agent.app.logs import call_logging, current_call
from agent.controller.actor import CallControllerActor
from agent.controller.fsm import ControllerFSM, ControllerPolicy
from agent.controller.prompt_rules import control_prompt
from agent.core import Bus, CallScope, Escalation
from agent.core.messages import (
    ActorCrashed,
    CallAnswered,
    CallEnded,
    CallNotAnswered,
    CallStarted,
    CallStateChanged,
    Channel,
    Direction,
    HangUp,
)
from agent.core.tasks import CallTasks
from agent.models.turn_detector import LexicalTurnDetector
from agent.session.actor import ReplyGate, SessionActor, SessionOptions
from agent.trust.call_controls import CallControls
from agent.trust.desk import GuardianDesk
from agent.trust.tools import CallTrust, ToolPolicy, load_tools
from agent.trust.verifier import GuardianVerifier
from amd.actor import AmdActor
from guardrails.actor import GuardrailActor
from guardrails.config import install_checks
from guardrails.decision import DecisionGuardrail

logger = logging.getLogger("agent.app.call")

__all__ = ["ModelSet", "CallOutcome", "run_call", "new_call_id"]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@dataclass
class ModelSet:
    """The model objects one call's session uses."""

    stt: stt.STT
    llm: llm.LLM
    tts: tts.TTS
    vad: vad.VAD | None
    turn_detection: str = "vad"
    #: How long after the end of the voice the VAD reports it (0 for text-only feeds).
    speech_end_offset: float = 0.0
    #: The AMD classifier for turns phrases and tones do not settle (None: built-in lexical).
    amd_classifier: DecisionModel | None = None
    #: Builds the guardrail's decision models and response guardrails (shared by calls).
    guardrails: GuardrailFactory | None = None
    #: The tool gate's and the watchdog's decision models (None: from the config, or heuristics).
    tool_gate_model: DecisionModel | None = None
    watchdog_oracle: DecisionModel | None = None


@dataclass
class CallOutcome:
    """How a call ended, in loop time."""

    call_id: str
    disposition: str
    reason: str
    answered_at: float | None
    ended_at: float


@call_logging
async def run_call(
    *,
    call_id: str,
    bus: Bus,
    direction: Direction,
    line: Any,
    config: AgentConfig,
    models: ModelSet,
    max_seconds: float | None = None,
    shutdown_grace: float = 2.0,
    channel: Channel = "voice",
    caller_number: str | None = None,
    desk: GuardianDesk | None = None,
) -> CallOutcome:
    """Run one call end to end over ``line`` (a transport that can also dial).

    Args:
        call_id: the call's id.
        bus: the call bus (observers subscribe before calling this).
        direction: outbound (we dial) or inbound (we answer).
        line: the transport: ``dial()``, ``mark_answered()``, ``run_callee()``
            (the simulator) plus the :class:`~agent.telephony.protocol.Line` methods.
        config: the agent config.
        models: the session's models.
        max_seconds: a hard bound on the answered call (replays), in loop time.
        shutdown_grace: how long actors get to stop before they are cancelled.
        channel: ``voice`` (a phone line) or ``chat`` (a text channel).
        caller_number: the far end's number (default: the config's ``caller_number``).
        desk: where guardian questions go (None: nobody can be asked).
    """
    loop = asyncio.get_running_loop()
    # every log line of the call carries its call_id (@call_logging) and current turn
    log_ctx = current_call()
    if log_ctx is not None:
        bus.subscribe(
            ("user_transcript", "user_turn_completed"), lambda m: log_ctx.set_turn(m.turn_id)
        )
    policy = ControllerPolicy(
        direction=direction,
        greet_after_silence=config.greet_after_silence,
        max_call_seconds=config.max_call_seconds,
        opening_instructions=config.opening_instructions.replace("{task}", config.task),
        inbound_greeting_instructions=config.inbound_greeting_instructions,
        amd=config.amd.enabled and direction == "outbound",
        screening_reply=config.fill(config.screening_reply),
        voicemail_message=config.fill(config.voicemail_message),
        ivr_goal=config.ivr_goal,
        uncertain_action=config.amd.uncertain_action,
        machine_reply_silence=config.amd.machine_reply_silence,
        vm_silence_without_beep=config.amd.vm_silence_without_beep,
        beep_gap=config.amd.beep_gap,
        post_message_wait=config.amd.post_message_wait,
        max_ivr_attempts=config.amd.max_ivr_attempts,
        max_screening_replies=config.amd.max_screening_replies,
        ivr_fallback=config.amd.ivr_fallback,
        transfer_targets=tuple(config.transfer.targets.items()),
        guardian=desk is not None and config.guardian.enabled,
        hold_message=config.guardian.hold_message,
        answer_instructions=config.guardian.answer_instructions,
        no_answer_instructions=config.guardian.no_answer_instructions,
    )
    bus.publish(CallStarted(call_id=call_id, at=loop.time(), direction=direction))
    status = await line.dial()
    if status != "answered":
        fsm = ControllerFSM(policy)
        not_answered = CallNotAnswered(call_id=call_id, at=loop.time(), status=status)
        bus.publish(not_answered)
        fsm.on_event(not_answered)
        disposition = fsm.disposition or "failed"
        ended = CallEnded(
            call_id=call_id,
            at=loop.time(),
            disposition=disposition,
            reason=f"not answered: {status}",
        )
        bus.publish(ended)
        return CallOutcome(call_id, disposition, ended.reason, None, ended.at)

    ended_ev = asyncio.Event()
    final: list[CallEnded] = []

    def on_end(ev: CallEnded) -> None:
        if not final:
            final.append(ev)
        ended_ev.set()

    controller: CallControllerActor | None = None

    async def on_escalate(esc: Escalation) -> None:
        bus.publish(
            ActorCrashed(call_id=call_id, at=loop.time(), actor=esc.actor, error=repr(esc.error))
        )
        if controller is not None and esc.actor != "controller" and not controller.stopped:
            await controller.fail(f"actor {esc.actor} failed")
        if not final:
            ev = CallEnded(
                call_id=call_id,
                at=loop.time(),
                disposition="error",
                reason=f"actor {esc.actor} failed",
            )
            bus.publish(ev)
            on_end(ev)

    answered_at: float | None = None
    tracked = CallTasks(call_id)
    # an LLM that can keep one model state per call (the local one) gets one for this
    # call, so its turns reuse their evaluated prompt prefix whatever other calls do
    for_call = getattr(models.llm, "for_call", None)
    call_llm = for_call() if for_call is not None else models.llm
    release = getattr(call_llm, "release", None)
    with tracked, contextlib.ExitStack() as scoped:
        if release is not None and call_llm is not models.llm:
            scoped.callback(release)
        async with CallScope(call_id, on_escalate=on_escalate) as scope:
            amd = AmdActor(
                call_id=call_id,
                bus=bus,
                config=config.amd,
                classifier=models.amd_classifier,
                speech_end_offset=models.speech_end_offset,
                sample_rate=line.capabilities.sample_rate,
                enabled=policy.amd,
            )
            if policy.amd and line.capabilities.audio_tap:
                line.add_audio_tap(amd.audio_tap)
            gate = ReplyGate(open=not policy.amd)
            factory = models.guardrails or GuardrailFactory(session_llm=models.llm)
            # a warm transfer needs a line that can run one (a LiveKit room)
            warm = config.transfer.mode == "warm" and line.capabilities.warm_transfer
            controls = _controls(
                call_id,
                bus,
                config,
                models,
                factory,
                channel=channel,
                caller_number=caller_number or config.caller_number or None,
                desk=desk,
            )
            goals = {"ivr": config.ivr_goal or "reach a person"}

            def on_state(msg: CallStateChanged) -> None:
                # an IVR menu is navigated toward the IVR goal; a person hears the task
                controls.set_goal(goals.get(msg.new, config.task))

            bus.subscribe("call_state_changed", on_state)
            bus.subscribe("tool_call_reviewed", controls.on_tool_review)
            session = SessionActor(
                call_id=call_id,
                bus=bus,
                transport=line,
                stt_model=models.stt,
                llm_model=call_llm,
                tts_model=models.tts,
                vad_model=models.vad,
                instructions=_instructions(config, direction, channel, policy.guardian, warm),
                options=SessionOptions(
                    turn_detection=_turn_detection(models.turn_detection, config),
                    preemptive_generation=config.turn.preemptive_generation,
                    min_endpointing_delay=config.turn.min_endpointing_delay,
                    max_endpointing_delay=config.turn.max_endpointing_delay,
                    min_interruption_duration=config.turn.min_interruption_duration,
                    quiet_before_reply=_quiet_before_reply(models.turn_detection, config),
                    tools=[
                        controls.policy.wrap(t) for t in load_tools(config.tools, source="tools")
                    ],
                    warm_transfer_targets=dict(config.transfer.targets) if warm else {},
                ),
                gate=gate,
                controls=controls,
            )
            guardrail = _guardrail_actor(call_id, bus, session, config, factory)
            session.use_hooks(GuardrailHooks(guardrail, call_id))
            controller = CallControllerActor(
                call_id=call_id,
                bus=bus,
                policy=policy,
                session=session,
                on_end=on_end,
                gate=gate,
                desk=desk if policy.guardian else None,
                question_timeout=config.guardian.question_timeout,
            )
            for actor in (guardrail, amd, session, controller):
                scope.start_actor(actor)
            started = asyncio.ensure_future(session.wait_started())
            early_end = asyncio.ensure_future(ended_ev.wait())
            await asyncio.wait([started, early_end], return_when=asyncio.FIRST_COMPLETED)
            early_end.cancel()
            if not final:
                line.mark_answered()
                answered_at = loop.time()
                bus.publish(CallAnswered(call_id=call_id, at=answered_at))
                scope.spawn(line.run_callee(), name=f"{call_id}:callee", daemon=True)
                try:
                    await asyncio.wait_for(ended_ev.wait(), max_seconds)
                except TimeoutError:
                    await controller.tell(
                        HangUp(call_id=call_id, at=loop.time(), reason="replay time bound")
                    )
                    try:
                        await asyncio.wait_for(ended_ev.wait(), 10.0)
                    except TimeoutError:
                        ev = CallEnded(
                            call_id=call_id,
                            at=loop.time(),
                            disposition="error",
                            reason="controller did not end the call",
                        )
                        bus.publish(ev)
                        on_end(ev)
            started.cancel()
            await scope.shutdown(shutdown_grace)
    stray = await tracked.drain(shutdown_grace)
    if stray:
        logger.debug("cancelled tasks the call left", extra={"call_id": call_id, "n": stray})
    end = final[0]
    return CallOutcome(call_id, end.disposition, end.reason, answered_at, end.at)


def _turn_detection(mode: str, config: AgentConfig) -> Any:
    """The session's turn detection: on audio, the lexical end-of-turn judge by default."""
    if mode == "vad" and config.turn.end_of_turn == "lexical":
        return LexicalTurnDetector()
    return mode


def _quiet_before_reply(mode: str, config: AgentConfig) -> float:
    """Callee silence after the VAD's end of speech before a reply may start (audio only).

    The pause the session waits for before it ends a finished-sounding turn
    (``min_endpointing_delay`` from the last speech, of which the VAD's
    ``vad_min_silence`` has passed when it reports the end): a reply prepared before
    the turn ended, such as an opening started on AMD's verdict, waits for the same,
    less :data:`QUIET_SLACK` (the session hears the VAD's events a little after the
    endpointing does, and a reply to a committed turn must not wait for that).
    """
    if mode != "vad":
        return 0.0
    wait = config.turn.min_endpointing_delay - config.turn.vad_min_silence - QUIET_SLACK
    return max(0.0, wait)


#: seconds taken off the callee silence a reply waits for (see _quiet_before_reply)
QUIET_SLACK = 0.05


def _guardrail_actor(
    call_id: str, bus: Bus, session: SessionActor, config: AgentConfig, factory: GuardrailFactory
) -> GuardrailActor:
    """The call's guardrail: its DecisionGuardrail (held by the session) and response checks."""
    gcfg = config.guardrails
    decision: DecisionGuardrail | None = None
    if gcfg.checks or gcfg.setup:
        decision = DecisionGuardrail(
            session, model=factory.decision_model(gcfg), timeout=gcfg.timeout, eager=gcfg.eager
        )
        install_checks(decision, gcfg)
    return GuardrailActor(
        call_id=call_id,
        bus=bus,
        guardrail=decision,
        response=factory.response(gcfg),
        agent_name=config.name,
        reply_mode=gcfg.reply_mode,
    )


def _instructions(
    config: AgentConfig, direction: Direction, channel: Channel, guardian: bool, warm: bool
) -> str:
    """The system prompt: the agent's instructions, then the call-control rules."""
    base = config.full_instructions()
    if not config.control_markers:
        return base
    rules = control_prompt(
        direction="chat" if channel == "chat" else direction,
        transfer_targets=list(config.transfer.targets),
        guardian=guardian,
        warm_transfer=warm,
    )
    return f"{base}\n\n{rules}"


def _controls(
    call_id: str,
    bus: Bus,
    config: AgentConfig,
    models: ModelSet,
    factory: GuardrailFactory,
    *,
    channel: Channel,
    caller_number: str | None,
    desk: GuardianDesk | None,
) -> CallControls:
    """The call's trust, tool policy and watchdog."""
    from guardrails.toolgate import ToolGate
    from guardrails.watchdog import Watchdog

    verifier = GuardianVerifier(config.guardian, caller_number) if config.guardian.enabled else None
    trust = CallTrust(channel=channel, caller_number=caller_number, verifier=verifier)
    gate = None
    if config.tool_gate.mode != "off":
        gate = ToolGate(
            mode=config.tool_gate.mode,
            model=models.tool_gate_model or factory.named(config.tool_gate.model),
            timeout=config.tool_gate.timeout,
            log=lambda entry: logger.info(
                "tool gate", extra={"call_id": call_id, "tool_gate": entry}
            ),
        )
    policy = ToolPolicy(
        call_id=call_id,
        trust=trust,
        publish=bus.publish,
        gate=gate,
        desk=desk if config.guardian.enabled else None,
        question_timeout=config.guardian.question_timeout,
        goal=config.task,
    )
    controls: CallControls | None = None
    watchdog = None
    if config.watchdog.mode != "off":

        def log(entry: dict[str, Any]) -> None:
            if entry.get("event") == "watchdog_verdict" and controls is not None:
                controls.on_verdict(entry, mode=config.watchdog.mode)
            logger.info("watchdog", extra={"call_id": call_id, "watchdog": entry})

        watchdog = Watchdog(
            mode=config.watchdog.mode,
            oracle=models.watchdog_oracle or factory.named(config.watchdog.model),
            every=config.watchdog.every,
            timeout=config.watchdog.timeout,
            goal=config.task,
            log=log,
        )
    controls = CallControls(
        call_id=call_id,
        publish=bus.publish,
        trust=trust,
        policy=policy,
        watchdog=watchdog,
        markers=config.control_markers,
        context_notes=verifier is not None or any(t.side_effects for t in config.tools),
    )
    return controls
