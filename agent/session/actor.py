"""SessionActor: one call's audio, VAD, STT, LLM and TTS through livekit's AgentSession.

The actor owns an ``AgentSession`` and a :class:`CallAgent`. Audio enters
through the transport's ``io.AudioInput`` and leaves through its
``io.AudioOutput`` (a LiveKit room in production, the simulator in replays).
AgentSession events become typed messages on the call bus; controller commands
arrive in the mailbox.

The agent and its guardrail seams live in :mod:`agent.session.agent`; the actor
runs the agent-turn hook when a speech handle completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import AgentSession, llm, stt, tts, vad
from livekit.agents.voice import (
    AgentStateChangedEvent,
    CloseEvent,
    CloseReason,
    SpeechCreatedEvent,
    UserInputTranscribedEvent,
    UserStateChangedEvent,
    io,
)
from livekit.agents.voice.speech_handle import SpeechHandle

from agent.core import Actor, Bus, is_virtual
from agent.core.messages import (
    ActorCrashed,
    AgentSentence,
    AgentSpeechStarted,
    AgentTurnCompleted,
    CallTransferred,
    DtmfReceived,
    DtmfSent,
    GenerateReply,
    HangUp,
    InterruptRun,
    ModelFailed,
    PlaybackFinished,
    RemoteHangup,
    Say,
    SendDtmf,
    SetTools,
    Transfer,
    TurnSettled,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTranscript,
    UserTurnCompleted,
)
from agent.session.agent import CallAgent, ReplyGate, SessionHooks, TurnVerdict
from agent.session.latency import LatencyRecorder
from agent.session.runs import RunRecord, RunResult, RunTracker
from agent.telephony.protocol import Line

logger = logging.getLogger("agent.session.actor")

__all__ = [
    "SessionActor",
    "SessionHooks",
    "CallAgent",
    "TurnVerdict",
    "SessionOptions",
    "ReplyGate",
]


@dataclass
class SessionOptions:
    """How the AgentSession is tuned for phone calls."""

    #: "vad" (audio), "stt" (text-only replays) or a livekit turn detector (audio: the
    #: VAD's silence, then the detector's judgement of the words)
    turn_detection: Any = "vad"
    min_endpointing_delay: float = 0.9
    max_endpointing_delay: float = 1.5
    min_interruption_duration: float = 0.5
    #: seconds of callee silence, counted from the VAD's end of speech, that a reply's
    #: first audio waits for (a reply prepared early, such as an opening started on
    #: AMD's verdict, does not start in a pause the session would not end a turn in)
    quiet_before_reply: float = 0.0
    tools: list[Any] = field(default_factory=list)
    #: start the LLM and TTS on the final transcript, before the turn is committed (the
    #: reply is kept only if the committed turn matches; not with "stt" turn detection)
    preemptive_generation: bool = True
    #: warm-transfer targets (name -> destination); given only when the line can do them
    warm_transfer_targets: dict[str, str] = field(default_factory=dict)


class SessionActor(Actor):
    """Wraps one AgentSession; publishes its events and obeys controller commands."""

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        transport: Line,
        stt_model: stt.STT,
        llm_model: llm.LLM,
        tts_model: tts.TTS,
        vad_model: vad.VAD | None,
        instructions: str,
        hooks: SessionHooks | None = None,
        options: SessionOptions | None = None,
        gate: ReplyGate | None = None,
        controls: Any | None = None,
    ) -> None:
        super().__init__("session")
        self.controls = controls
        self._commanding = False
        #: every run (agent reply) and the future that settles it
        self.runs = RunTracker()
        self.gate = gate or ReplyGate()
        self.call_id = call_id
        self.bus = bus
        self.transport = transport
        self.options = options or SessionOptions()
        self._hooks = hooks or SessionHooks()
        self._models = (stt_model, llm_model, tts_model, vad_model)
        self._instructions = instructions
        self.session: AgentSession | None = None
        self.agent: CallAgent | None = None
        #: the session's DecisionGuardrail slot (one per session): see attach_guardrail
        self._guardrail: Any = None
        self._handles: dict[str, SpeechHandle] = {}
        self._speaking_run: str | None = None
        self._closed = False
        self._started = asyncio.Event()
        self._hook_tasks: set[asyncio.Future[None]] = set()
        self._played_runs: set[str] = set()
        self._protected: SpeechHandle | None = None
        self._pending_finals: list[str] = []
        self._self_recorded: list[str] = []
        #: a reply livekit started before the turn was committed (preemptive generation)
        self._preemptive: SpeechHandle | None = None
        #: preemptive replies not kept (yet): their messages wait in the agent
        self._unkept: set[str] = set()
        self.latency: LatencyRecorder | None = None
        #: when the VAD last heard the callee stop (None while speaking, or before)
        self._quiet_since: float | None = None

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _publish(self, msg: Any) -> None:
        latency = self.latency
        if latency is not None:
            # the latency milestones the session's own messages mark
            match msg:
                case UserSpeechStarted(at=at):
                    latency.speech_started(at)
                case UserSpeechStopped(at=at):
                    latency.vad_end(at)
                case UserTranscript(at=at, final=True, text=text) if text.strip():
                    latency.stt_final(at)
                case UserTurnCompleted(at=at, turn_id=turn_id):
                    latency.committed(turn_id, at)
                case AgentSentence(at=at, run_id=run_id, index=0):
                    latency.mark(run_id, "first_sentence", at)
                case AgentSpeechStarted(at=at, run_id=run_id):
                    latency.mark(run_id, "first_audio", at)
        self.bus.publish(msg)

    # -- lifecycle ---------------------------------------------------------

    async def on_start(self) -> None:
        if self.session is not None:
            return  # a restart keeps the running AgentSession
        stt_model, llm_model, tts_model, vad_model = self._models
        o = self.options
        version = self.runs.version
        self.latency = LatencyRecorder(
            call_id=self.call_id,
            publish=self.bus.publish,
            clock="virtual" if is_virtual() else "wall",
            audio_end=(
                self.transport.callee_audio_end  # type: ignore[attr-defined]
                if self.transport.capabilities.callee_audio_end
                else None
            ),
        )
        self.session = AgentSession(
            stt=stt_model,
            vad=vad_model,
            llm=llm_model,
            tts=tts_model,
            turn_handling={  # type: ignore[arg-type]
                "turn_detection": o.turn_detection,  # type: ignore[typeddict-item]
                "endpointing": {
                    "mode": "fixed",
                    "min_delay": o.min_endpointing_delay,
                    "max_delay": o.max_endpointing_delay,
                },
                "interruption": {
                    "enabled": True,
                    "mode": "vad",
                    "min_duration": o.min_interruption_duration,
                    "resume_false_interruption": False,
                    "false_interruption_timeout": None,
                },
                # switched per agent (CallAgent follows the reply gate)
                "preemptive_generation": {"enabled": False},
            },
            user_away_timeout=None,
            aec_warmup_duration=None,
        )
        self.agent = CallAgent(
            instructions=self._instructions,
            hooks=self._hooks,
            publish=self._publish,
            call_id=self.call_id,
            tools=o.tools,
            gate=self.gate,
            send_dtmf=self._tool_dtmf,
            opening_lost=self._opening_lost,
            committed=self._on_commit,
            controls=self.controls,
            no_reply=self._turn_without_reply,
            live=lambda: self.runs.live(version),
            warm_transfer=self._warm_transfer if o.warm_transfer_targets else None,
            latency=self.latency,
            preemptive=o.preemptive_generation and o.turn_detection != "stt",
            reply_ready=self._reply_ready,
            pending=self._unkept.__contains__,
            quiet_for=self._callee_quiet_for,
            quiet_before_reply=o.quiet_before_reply,
        )
        if self.controls is not None:
            self.controls.interrupt = self._interrupt_for
            self.controls.start()
        s = self.session
        if self.transport.capabilities.attach:
            # a LiveKit room wires its participant's audio to the session (RoomIO)
            await self.transport.attach(s)  # type: ignore[attr-defined]
        s.input.audio = self.transport.audio_input
        s.output.audio = self.transport.audio_output
        s.on("user_state_changed", self._on_user_state)
        s.on("agent_state_changed", self._on_agent_state)
        s.on("user_input_transcribed", self._on_transcribed)
        s.on("speech_created", self._on_speech_created)
        s.on("error", self._on_error)
        s.on("close", self._on_session_close)
        self.transport.set_dtmf_handler(self._on_dtmf)
        self.transport.set_hangup_handler(self._on_remote_hangup)
        self.transport.audio_output.on("playback_finished", self._on_playback_finished)
        await s.start(self.agent, record=False)
        self._started.set()
        prefill = getattr(llm_model, "prefill", None)
        if prefill is not None and self._instructions and not is_virtual():
            # the local LLM evaluates the instructions while the line rings (see
            # LlamaLLM.prefill); a failure costs only that head start. On the
            # virtual clock time stands still while a model runs, so there is no
            # ringing to hide it in, and a call that never asks the LLM (a
            # voicemail) would only pay for it
            self.spawn(self._prefill(prefill), name=f"{self.name}:prefill", crash=False)

    async def _prefill(self, prefill: Callable[[str], Awaitable[int]]) -> None:
        try:
            await prefill(self._instructions)
        except Exception:
            logger.warning(
                "prefilling the LLM's prompt prefix failed",
                exc_info=True,
                extra={"call_id": self.call_id},
            )

    async def on_stop(self) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the AgentSession (idempotent).

        The run version moves first, and every run and turn still pending
        settles ``aborted``, before anything is interrupted: whatever a late
        callback of an aborted run tries afterwards is dropped.
        """
        if self._closed or self.session is None:
            return
        self._closed = True
        if self.latency is not None:
            self.latency.flush()
        for result in self.runs.abort_all():
            self._publish_settled(result)
        if self.controls is not None:
            await self.controls.aclose()
        if self._hook_tasks:
            await asyncio.wait(self._hook_tasks, timeout=1.0)
            for t in self._hook_tasks:
                t.cancel()
        try:
            await asyncio.wait_for(self.session.aclose(), timeout=5.0)
        except Exception:
            logger.exception("closing the agent session failed", extra={"call_id": self.call_id})

    # -- events from livekit -----------------------------------------------

    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        if ev.new_state == "speaking":
            self._quiet_since = None
            self._unprotect()  # new speech may interrupt any reply again
            self._publish(UserSpeechStarted(call_id=self.call_id, at=self._now()))
        elif ev.old_state == "speaking":
            self._quiet_since = self._now()
            self._publish(UserSpeechStopped(call_id=self.call_id, at=self._now()))

    def _callee_quiet_for(self) -> float | None:
        """Seconds since the VAD heard the callee stop; None while speaking or before."""
        since = self._quiet_since
        return None if since is None else self._now() - since

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        if ev.new_state == "speaking" and self.session is not None:
            handle = self.session.current_speech
            run_id = handle.id if handle is not None else "run_unknown"
            self._speaking_run = run_id
            self._played_runs.add(run_id)
            self._publish(AgentSpeechStarted(call_id=self.call_id, at=self._now(), run_id=run_id))

    def _on_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        if ev.is_final and ev.transcript.strip():
            self._pending_finals.append(ev.transcript.strip())
            protected = self._protected
            if protected is not None and not protected.done() and not protected.interrupted:
                self._record_pending()
        turn_id = f"turn_{(self.agent._turns if self.agent else 0) + 1}"
        text = self.controls.redact(ev.transcript) if self.controls is not None else ev.transcript
        self._publish(
            UserTranscript(
                call_id=self.call_id,
                at=self._now(),
                turn_id=turn_id,
                text=text,
                final=ev.is_final,
            )
        )

    def _on_speech_created(self, ev: SpeechCreatedEvent) -> None:
        handle = ev.speech_handle
        turn_id: str | None = None
        if self.agent is not None:
            self.agent.latest_created_run = handle.id
            if ev.source == "generate_reply" and not self._commanding:
                # livekit's automatic reply to the turn the agent just let through (every
                # reply the session asks for itself is made under ``_commanding``)
                turn_id, self.agent.replying_turn = self.agent.replying_turn, None
                if turn_id is None:
                    # a preemptive reply: it becomes a run only if livekit keeps it for
                    # the committed turn (see _reply_ready); a discarded one never existed
                    self._preemptive = handle
                    self._unkept.add(handle.id)
                    handle.add_done_callback(self._on_preemptive_done)
                    return
        self._begin(handle, turn_id)

    def _begin(self, handle: SpeechHandle, turn_id: str | None) -> None:
        self._handles[handle.id] = handle
        self.runs.begin(handle.id, turn_id)
        if turn_id is not None and self.latency is not None:
            self.latency.bind(handle.id, turn_id, preemptive=handle is self._preemptive)
        started = self._now()
        handle.add_done_callback(lambda h: self._on_speech_done(h, started))

    def _reply_ready(self, turn_id: str) -> None:
        """The agent let ``turn_id`` through; livekit now keeps or replaces the preemptive reply.

        livekit decides synchronously after ``on_user_turn_completed`` returns: it either
        schedules the preemptive handle or creates a new one (``speech_created``, which
        takes ``replying_turn``). A callback queued now runs after that decision.
        """
        if self._preemptive is not None:
            asyncio.get_running_loop().call_soon(self._adopt_preemptive, turn_id)

    def _adopt_preemptive(self, turn_id: str) -> None:
        handle, agent = self._preemptive, self.agent
        if handle is None or agent is None or agent.replying_turn != turn_id:
            return  # livekit replaced it with a new reply
        if handle.done() and not handle.scheduled:
            return  # it was discarded after all
        agent.replying_turn = None
        self._begin(handle, turn_id)
        self._preemptive = None
        self._unkept.discard(handle.id)
        agent.run_kept(handle.id)

    def _on_preemptive_done(self, handle: SpeechHandle) -> None:
        if self._preemptive is handle:
            self._preemptive = None
        if handle.id in self._unkept:
            # never spoken: no run, no turn, no message
            self._unkept.discard(handle.id)
            if self.agent is not None:
                self.agent.run_dropped(handle.id)
            if self.latency is not None:
                self.latency.discard(handle.id)

    def _turn_without_reply(self, turn_id: str) -> None:
        self.runs.no_reply(turn_id)
        self._publish(
            TurnSettled(call_id=self.call_id, at=self._now(), turn_id=turn_id, outcome="no_reply")
        )

    def _publish_settled(self, result: RunResult) -> None:
        self._publish(
            TurnSettled(
                call_id=self.call_id,
                at=self._now(),
                turn_id=result.turn_id,
                run_id=result.run_id,
                outcome=result.outcome,
                text=result.text,
            )
        )

    def _on_speech_done(self, handle: SpeechHandle, created_at: float) -> None:
        self._handles.pop(handle.id, None)
        if self.latency is not None:
            self.latency.finish(handle.id)
        rec = self.runs.record(handle.id)
        text = _text_of(handle)
        try:
            self._speech_done(handle, rec, text, created_at)
        finally:
            # the run's future settles whatever happened above (once: settle is idempotent)
            failed = self.agent is not None and handle.id in self.agent.failed_runs
            if self.agent is not None:
                self.agent.failed_runs.discard(handle.id)
            outcome = "failed" if failed else "interrupted" if handle.interrupted else "completed"
            if rec is not None and not rec.done.done():
                self._publish_settled(self.runs.settle(handle.id, outcome, text))  # type: ignore[arg-type]

    def _speech_done(
        self, handle: SpeechHandle, rec: RunRecord | None, text: str, created_at: float
    ) -> None:
        interrupted = handle.interrupted
        msg = AgentTurnCompleted(
            call_id=self.call_id,
            at=self._now(),
            run_id=handle.id,
            text=text,
            interrupted=interrupted,
            started_at=created_at,
        )
        self._publish(msg)
        agent = self.agent
        if rec is not None and not self.runs.live(rec.version):
            return  # the call is being torn down: nothing of this run may act any more
        if self.controls is not None and text:
            self.controls.on_agent_text(text)
        say = agent.blocked_say.pop(handle.id, None) if agent is not None else None
        if say and not interrupted and handle.id in self._played_runs and self.session:
            # a sentence of this reply was blocked: say the replacement after what played
            with self._command():
                self.session.say(say)
        self._spawn_hook(self._hooks.on_agent_turn(handle.id, text, interrupted))

    def _spawn_hook(self, coro: Awaitable[None]) -> None:
        # agent-turn hooks observe only; they are owned here and awaited on close
        task = asyncio.ensure_future(coro)
        self._hook_tasks.add(task)
        task.add_done_callback(self._hook_tasks.discard)

    def _on_error(self, ev: Any) -> None:
        error = getattr(ev, "error", None)
        kind = getattr(error, "type", "")
        model = {"stt_error": "stt", "llm_error": "llm", "tts_error": "tts"}.get(kind, "other")
        inner = getattr(error, "error", error)
        recoverable = bool(getattr(error, "recoverable", False))
        logger.warning(
            "agent session error",
            extra={
                "call_id": self.call_id,
                "source": type(getattr(ev, "source", None)).__name__,
                "model": model,
                "error": type(inner).__name__,
                "recoverable": recoverable,
            },
        )
        if not recoverable:
            # livekit goes on (it closes the session only after several of these),
            # so the call may end normally: the message keeps the failure on record
            self._publish(
                ModelFailed(
                    call_id=self.call_id, at=self._now(), model=model, error=type(inner).__name__
                )
            )

    def _on_session_close(self, ev: CloseEvent) -> None:
        # livekit closed the session by itself (e.g. a model kept failing): the call
        # cannot go on, so the controller must end it with disposition `error`
        if self._closed or ev.reason != CloseReason.ERROR:
            return
        self._closed = True
        source = type(ev.error).__name__ if ev.error is not None else "unknown"
        logger.error("agent session failed", extra={"call_id": self.call_id, "error": source})
        self._publish(
            ActorCrashed(call_id=self.call_id, at=self._now(), actor="session", error=source)
        )

    def _on_remote_hangup(self) -> None:
        # the far end left: the call is over for the session
        self._publish(RemoteHangup(call_id=self.call_id, at=self._now()))

    def _on_dtmf(self, digits: str) -> None:
        if self.controls is not None:
            self.controls.on_dtmf(digits)
        self._publish(DtmfReceived(call_id=self.call_id, at=self._now(), digits=digits))

    def _on_playback_finished(self, ev: io.PlaybackFinishedEvent) -> None:
        self._publish(
            PlaybackFinished(
                call_id=self.call_id,
                at=self._now(),
                run_id=self._speaking_run,
                position=ev.playback_position,
                interrupted=ev.interrupted,
            )
        )

    async def _let_reply_finish(self, *, within: float) -> None:
        """Wait (bounded) until no reply is being generated or played."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self._handles and loop.time() < deadline:
            pending = [h for h in self._handles.values() if not h.done()]
            if not pending:
                return
            waits = [asyncio.ensure_future(h.wait_for_playout()) for h in pending]
            try:
                await asyncio.wait(waits, timeout=deadline - loop.time())
            finally:
                for w in waits:
                    w.cancel()

    # -- a protected reply ---------------------------------------------------
    #
    # livekit interrupts the speech in progress when it commits a callee turn.
    # A reply the controller starts right after the callee's words (AMD's
    # "Hello?" verdict comes before STT and endpointing are done) would be cut
    # by the commit of those very words. Such a reply is generated with
    # interruptions off until the callee speaks again; livekit then skips the
    # commit (no hook, no history), so the session records those words itself.

    def _protect(self, handle: SpeechHandle) -> None:
        self._protected = handle
        self._record_pending()

    def _unprotect(self) -> None:
        handle, self._protected = self._protected, None
        if handle is not None and not handle.done() and not handle.interrupted:
            handle.allow_interruptions = True

    def _record_pending(self) -> None:
        """Record the finals livekit will not commit (a protected reply is playing)."""
        if not self._pending_finals or self.agent is None:
            return
        text = " ".join(self._pending_finals).strip()
        self._pending_finals.clear()
        if not text:
            return
        self.agent._turns += 1
        self._self_recorded.append(text)
        self._publish(
            UserTurnCompleted(
                call_id=self.call_id,
                at=self._now(),
                turn_id=f"turn_{self.agent._turns}",
                text=text,
            )
        )
        agent = self.agent
        ctx = agent.chat_ctx.copy()
        ctx.add_message(role="user", content=text)
        self._spawn_hook(agent.update_chat_ctx(ctx))

    def _on_commit(self, text: str) -> bool:
        """livekit committed a turn: True when the session already recorded it."""
        self._pending_finals.clear()
        if text.strip() in self._self_recorded:
            self._self_recorded.remove(text.strip())
            return True
        return False

    def _opening_lost(self) -> bool:
        """Whether the controller's opening was interrupted before any of it played."""
        run = self.gate.opening_run
        if run is None or run in self._played_runs:
            return False
        handle = self._handles.get(run)
        return handle is None or handle.interrupted

    async def _warm_transfer(self, target: str, chat_ctx: llm.ChatContext) -> str:
        """The ``transfer_call`` tool: brief a person at ``target``, then connect the caller."""
        targets = self.options.warm_transfer_targets
        name = target.strip().lower()
        if name not in targets:
            return f"There is no transfer target {target!r}; use one of: {', '.join(targets)}."
        task = self.transport.warm_transfer_task(targets[name], chat_ctx)  # type: ignore[attr-defined]
        try:
            await task
        except Exception as exc:
            logger.warning(
                "warm transfer failed", extra={"call_id": self.call_id, "error": type(exc).__name__}
            )
            return "The transfer did not go through. Apologise and keep helping the caller."
        self._publish(CallTransferred(call_id=self.call_id, at=self._now(), target=name))
        return "The caller is connected to the person; the call is handed over."

    @contextlib.contextmanager
    def _command(self) -> Iterator[None]:
        """Speech created in here is the session's own, not a reply to a callee turn."""
        self._commanding = True
        try:
            yield
        finally:
            self._commanding = False

    def _interrupt(self, run_id: str) -> bool:
        """Interrupt ``run_id`` only: a stale id (over, or from before a teardown) does nothing."""
        handle = self._handles.get(run_id)
        if handle is None or handle.done() or not self.runs.current(run_id):
            return False
        handle.interrupt(force=True)
        return True

    def _interrupt_for(self, run_id: str, reason: str) -> None:
        """The watchdog found a blocker in ``run_id``: stop it, reply again with its reminder."""
        if self._closed or not self._interrupt(run_id):
            return
        logger.info(
            "run interrupted", extra={"call_id": self.call_id, "run_id": run_id, "reason": reason}
        )
        if self.session is not None and self.gate.allows():
            with self._command():
                self.session.generate_reply()

    async def _tool_dtmf(self, digits: str) -> None:
        await self.transport.send_dtmf(digits)
        self._publish(DtmfSent(call_id=self.call_id, at=self._now(), digits=digits))

    # -- seams the composition root plugs in ------------------------------------

    @property
    def hooks(self) -> SessionHooks:
        """The hooks the agent consults before and after each turn and sentence."""
        return self._hooks

    def use_hooks(self, hooks: SessionHooks) -> None:
        """Plug in the call's hooks (the guardrail's); only before the session starts.

        Raises:
            RuntimeError: the session has already started (its agent holds the old hooks).
        """
        if self.agent is not None:
            raise RuntimeError("a session's hooks are set before it starts")
        self._hooks = hooks

    @property
    def guardrail(self) -> Any:
        """The session's DecisionGuardrail, if one is attached."""
        return self._guardrail

    def attach_guardrail(self, guardrail: Any) -> None:
        """Hold ``guardrail`` in the session's one guardrail slot (``DecisionGuardrail``).

        Raises:
            RuntimeError: another guardrail is attached.
        """
        if self._guardrail is not None and self._guardrail is not guardrail:
            raise RuntimeError("this session already has a guardrail")
        self._guardrail = guardrail

    def detach_guardrail(self, guardrail: Any) -> None:
        """Free the slot if ``guardrail`` holds it."""
        if self._guardrail is guardrail:
            self._guardrail = None

    async def wait_started(self) -> None:
        """Return once the livekit session has started (the call can be answered)."""
        await self._started.wait()

    # -- commands ----------------------------------------------------------

    async def receive(self, msg: Any) -> Any:
        await self._started.wait()
        session = self.session
        assert session is not None
        match msg:
            case Say(text=text, allow_interruptions=allow):
                with self._command():
                    return session.say(text, allow_interruptions=allow).id
            case GenerateReply(instructions=instr, user_input=user_input, protect=protect):
                kwargs: dict[str, Any] = {}
                if instr:
                    kwargs["instructions"] = instr
                if user_input:
                    kwargs["user_input"] = user_input
                if protect:
                    kwargs["allow_interruptions"] = False
                with self._command():
                    reply = session.generate_reply(**kwargs)
                if msg.opening and self.agent is not None:
                    # no await since generate_reply: its request has not started yet
                    self.agent.opening_runs.add(reply.id)
                    self.agent.openings.add(reply.id)
                if protect:
                    self._protect(reply)
                return reply.id
            case InterruptRun(run_id=run_id):
                return self._interrupt(run_id)
            case Transfer(target=target, destination=destination):
                if not self.transport.capabilities.transfer:
                    raise RuntimeError("this line cannot transfer calls")
                await self._let_reply_finish(within=15.0)
                await self.transport.transfer(destination)  # type: ignore[attr-defined]
                self._publish(CallTransferred(call_id=self.call_id, at=self._now(), target=target))
                return True
            case SendDtmf(digits=digits):
                await self._tool_dtmf(digits)
                return None
            case SetTools(end_call=end_call, send_dtmf=send_dtmf):
                assert self.agent is not None
                await self.agent.update_tools(
                    self.agent.call_tools(end_call=end_call, send_dtmf=send_dtmf)
                )
                return None
            case HangUp(graceful=graceful):
                if graceful:
                    await self._let_reply_finish(within=15.0)
                await self.transport.hang_up()
                return None
            case RemoteHangup():
                return None
            case _:
                raise TypeError(f"session cannot handle {getattr(msg, 'kind', msg)!r}")


def _text_of(handle: SpeechHandle) -> str:
    """What the agent said in a run (its assistant messages), markers already stripped."""
    return " ".join(
        (item.text_content or "")
        for item in handle.chat_items
        if isinstance(item, llm.ChatMessage) and item.role == "assistant"
    ).strip()
