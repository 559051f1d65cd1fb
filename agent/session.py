"""SessionActor: one call's audio, VAD, STT, LLM and TTS through livekit's AgentSession.

The actor owns an ``AgentSession`` and a :class:`CallAgent`. Audio enters
through the transport's ``io.AudioInput`` and leaves through its
``io.AudioOutput`` (a LiveKit room in production, the simulator in replays).
AgentSession events become typed messages on the call bus; controller commands
arrive in the mailbox.

Guardrail seams (filled by the guardrail work): :class:`SessionHooks` is called
on each completed user turn (inside ``Agent.on_user_turn_completed``), on each
agent sentence between the LLM text stream and TTS (``Agent.llm_node`` is
wrapped by :class:`SentenceGate`), and on each agent turn (the speech handle's
completion).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from livekit.agents import Agent, AgentSession, function_tool, llm, stt, tts, vad
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

from .messages import (
    URGENT_KINDS,
    ActorCrashed,
    AgentSentence,
    AgentSpeechStarted,
    AgentTurnCompleted,
    DtmfReceived,
    DtmfSent,
    GenerateReply,
    HangUp,
    InterruptRun,
    PlaybackFinished,
    RemoteHangup,
    Say,
    SendDtmf,
    SetTools,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTranscript,
    UserTurnCompleted,
)
from .runtime import Actor, Bus
from .sentences import SentenceGate

logger = logging.getLogger("agent.session")

__all__ = [
    "SessionActor",
    "SessionHooks",
    "CallAgent",
    "CallTransport",
    "TurnVerdict",
    "SessionOptions",
    "ReplyGate",
]


@dataclass(frozen=True)
class TurnVerdict:
    """What a guardrail hook decided: allow, block (optionally saying something) or steer."""

    action: str = "allow"  # allow | block | steer
    say: str | None = None
    instructions: str | None = None
    #: hang up (gracefully, after ``say``) once the block is handled
    end_call: bool = False


ALLOW = TurnVerdict()


class SessionHooks:
    """The guardrail seams. The default allows everything; the guardrail overrides these."""

    async def on_user_turn(self, turn_id: str, text: str) -> TurnVerdict:
        return ALLOW

    async def on_agent_sentence(self, run_id: str, index: int, text: str) -> TurnVerdict:
        return ALLOW

    async def on_agent_turn(self, run_id: str, text: str, interrupted: bool) -> None:
        return None

    #: Whether whole replies are checked (by :meth:`on_reply`) before any of them is spoken.
    buffered_replies: bool = False

    async def on_reply(self, run_id: str, text: str) -> TurnVerdict:
        """A whole reply, in buffered mode: allow, or block with replacement text in ``say``."""
        return ALLOW


class CallTransport(Protocol):
    """What the session needs from a phone line (the simulator or a LiveKit room)."""

    audio_input: io.AudioInput
    audio_output: io.AudioOutput

    def set_dtmf_handler(self, handler: Callable[[str], None]) -> None: ...

    def set_hangup_handler(self, handler: Callable[[], None]) -> None: ...

    def add_audio_tap(self, tap: Callable[[float, Any], None]) -> None:
        """Call ``tap(loop time, float32 samples)`` with every callee frame after the answer."""
        ...

    async def send_dtmf(self, digits: str) -> None: ...

    async def hang_up(self) -> None: ...


class ReplyGate:
    """Whether the session may answer a completed callee turn by itself.

    The call controller owns it: while AMD has not found a person (or while the
    controller's own opening reply is in flight) callee turns go into the
    history without an automatic reply, and the controller decides what is said.
    """

    def __init__(self, open: bool = True) -> None:
        self.open = open
        self.opening_in_flight = False
        #: the controller's opening reply: its run id and instructions
        self.opening_run: str | None = None
        self.opening_instructions: str | None = None

    def allows(self) -> bool:
        return self.open and not self.opening_in_flight


@dataclass
class SessionOptions:
    """How the AgentSession is tuned for phone calls."""

    turn_detection: str = "vad"  # "vad" (audio) or "stt" (text-only replays)
    min_endpointing_delay: float = 0.5
    max_endpointing_delay: float = 3.0
    min_interruption_duration: float = 0.5
    tools: list[Any] = field(default_factory=list)


class CallAgent(Agent):
    """The Agent subclass that carries the guardrail seams."""

    def __init__(
        self,
        *,
        instructions: str,
        hooks: SessionHooks,
        publish: Callable[[Any], None],
        call_id: str,
        tools: list[Any] | None = None,
        gate: ReplyGate | None = None,
        send_dtmf: Callable[[str], Awaitable[None]] | None = None,
        opening_lost: Callable[[], bool] | None = None,
        committed: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(instructions=instructions, tools=tools or [])
        self._opening_lost = opening_lost or (lambda: False)
        self._committed = committed or (lambda text: False)
        self._base_tools = list(tools or [])
        # the call-control tools, found on the class while the agent is not running;
        # send_dtmf is offered only in IVR replies
        self._control_tools = {
            name: t for t in self._tools if (name := _tool_name(t)) in ("end_call", "send_dtmf")
        }
        self._tools = [t for t in self._tools if _tool_name(t) != "send_dtmf"]
        self._gate = gate or ReplyGate()
        self._send_dtmf = send_dtmf
        self._hooks = hooks
        self._publish = publish
        self._call_id = call_id
        self._turns = 0
        #: run id -> what to say after that reply, because a sentence of it was blocked
        self.blocked_say: dict[str, str] = {}
        self.latest_created_run: str | None = None

    @function_tool
    async def end_call(self) -> str:
        """End the phone call. Call this after you have said goodbye."""
        loop = asyncio.get_running_loop()
        self._publish(
            HangUp(
                call_id=self._call_id, at=loop.time(), reason="agent ended the call", graceful=True
            )
        )
        return "The line will close once your goodbye has been spoken."

    @function_tool
    async def send_dtmf(self, digits: str) -> str:
        """Press keys on the phone keypad to answer an automated menu.

        Args:
            digits: The keys to press, for example "2" or "1#" (0-9, * and #).
        """
        keys = "".join(ch for ch in digits if ch in "0123456789*#")
        if not keys:
            return "No valid keys: use digits 0-9, * or #."
        if self._send_dtmf is None:
            return "The keypad is not available on this call."
        await self._send_dtmf(keys)
        return f"Pressed {keys}."

    def call_tools(self, *, end_call: bool, send_dtmf: bool) -> list[Any]:
        """The tool list with the call-control tools switched on or off."""
        wanted = {"end_call"} if end_call else set()
        if send_dtmf:
            wanted.add("send_dtmf")
        own = [t for name, t in self._control_tools.items() if name in wanted]
        return [*self._base_tools, *own]

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        from livekit.agents.llm import StopResponse

        text = new_message.text_content or ""
        recorded = self._committed(text)  # already recorded while a reply was protected
        if not recorded:
            self._turns += 1
            loop = asyncio.get_running_loop()
            self._publish(
                UserTurnCompleted(
                    call_id=self._call_id, at=loop.time(), turn_id=f"turn_{self._turns}", text=text
                )
            )
        turn_id = f"turn_{self._turns}"
        gate = self._gate
        if gate.open and gate.opening_in_flight and self._opening_lost():
            # this turn's commit cut the controller's opening before a word of it
            # was heard (the person's "Hello?" was still being transcribed when AMD
            # decided): this reply is the opening
            gate.opening_in_flight = False
            if gate.opening_instructions:
                turn_ctx.add_message(role="system", content=gate.opening_instructions)
        elif not gate.allows():
            # the controller decides what to say (AMD has not found a person yet,
            # or its opening reply is already on its way); the turn stays in history
            if not recorded:
                await self._keep_in_history(new_message)
            raise StopResponse()
        verdict = await self._hooks.on_user_turn(turn_id, text)
        if verdict.action == "block":
            # no reply; the caller's words stay in the history
            if not recorded:
                await self._keep_in_history(new_message)
            if verdict.say:
                self.session.say(verdict.say)
            if verdict.end_call:
                self._publish(
                    HangUp(
                        call_id=self._call_id,
                        at=asyncio.get_running_loop().time(),
                        reason="guardrail ended the call",
                        graceful=True,
                    )
                )
            raise StopResponse()
        if verdict.action == "steer" and verdict.instructions:
            # this reply's context only: livekit passes a copy of the history here
            turn_ctx.add_message(role="system", content=verdict.instructions)

    async def _keep_in_history(self, message: llm.ChatMessage) -> None:
        """Add a user message livekit drops when the hook stops the reply."""
        if not (message.text_content or "").strip():
            return
        ctx = self.chat_ctx.copy()
        ctx.items.append(message)
        await self.update_chat_ctx(ctx)

    def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: Any
    ) -> AsyncIterable[llm.ChatChunk | str]:
        upstream = Agent.default.llm_node(self, chat_ctx, tools, model_settings)
        run_id = _reply_run_id(self.latest_created_run)
        gate = SentenceGate(
            run_id=run_id,
            check=self._check_sentence,
            reply_check=self._check_reply if self._hooks.buffered_replies else None,
        )
        return gate.process(_as_async_iter(upstream))

    async def _check_sentence(self, run_id: str, index: int, text: str) -> bool:
        verdict = await self._hooks.on_agent_sentence(run_id, index, text)
        if verdict.action == "block":
            if verdict.say:
                self.blocked_say[run_id] = verdict.say
            return False
        if not self._hooks.buffered_replies:
            self._released(run_id, index, text)
        return True

    async def _check_reply(self, run_id: str, text: str) -> tuple[bool, str | None]:
        verdict = await self._hooks.on_reply(run_id, text)
        if verdict.action == "block":
            if verdict.say:
                self._released(run_id, 0, verdict.say)
            return False, verdict.say
        self._released(run_id, 0, text)
        return True, None

    def _released(self, run_id: str, index: int, text: str) -> None:
        loop = asyncio.get_running_loop()
        self._publish(
            AgentSentence(
                call_id=self._call_id, at=loop.time(), run_id=run_id, index=index, text=text
            )
        )


def _tool_name(tool: Any) -> str | None:
    info = getattr(tool, "info", None)
    return getattr(info, "name", None)


def _reply_run_id(fallback: str | None) -> str:
    """The id of the speech handle this LLM generation belongs to.

    livekit offers no public accessor for the reply's speech handle inside
    ``llm_node``. Its reply task carries the handle in the context variable
    ``agent_activity._SpeechHandleContextVar`` (livekit's own ``Agent`` code reads
    it the same way), so we read it; if that private name ever disappears we
    fall back to the most recently created handle (``speech_created`` fires just
    before livekit starts the reply task).
    """
    try:
        from livekit.agents.voice.agent_activity import _SpeechHandleContextVar

        handle = _SpeechHandleContextVar.get(None)
    except ImportError:  # pragma: no cover - depends on the livekit version
        handle = None
    if handle is not None:
        return str(handle.id)
    return fallback or "run_unknown"


async def _as_async_iter(obj: Any) -> AsyncIterator[Any]:
    if asyncio.iscoroutine(obj):
        obj = await obj
    if obj is None:
        return
    if isinstance(obj, str | llm.ChatChunk):
        yield obj
        return
    async for item in obj:
        yield item


class SessionActor(Actor):
    """Wraps one AgentSession; publishes its events and obeys controller commands."""

    urgent_kinds = URGENT_KINDS

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        transport: CallTransport,
        stt_model: stt.STT,
        llm_model: llm.LLM,
        tts_model: tts.TTS,
        vad_model: vad.VAD | None,
        instructions: str,
        hooks: SessionHooks | None = None,
        options: SessionOptions | None = None,
        gate: ReplyGate | None = None,
    ) -> None:
        super().__init__("session")
        self.gate = gate or ReplyGate()
        self.call_id = call_id
        self.bus = bus
        self.transport = transport
        self.options = options or SessionOptions()
        self.hooks = hooks or SessionHooks()
        self._models = (stt_model, llm_model, tts_model, vad_model)
        self._instructions = instructions
        self.session: AgentSession | None = None
        self.agent: CallAgent | None = None
        #: the session's DecisionGuardrail slot (one per session)
        self.guardrail: Any = None
        self._handles: dict[str, SpeechHandle] = {}
        self._speaking_run: str | None = None
        self._closed = False
        self._started = asyncio.Event()
        self._hook_tasks: set[asyncio.Future[None]] = set()
        self._played_runs: set[str] = set()
        self._protected: SpeechHandle | None = None
        self._pending_finals: list[str] = []
        self._self_recorded: list[str] = []

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _publish(self, msg: Any) -> None:
        self.bus.publish(msg)

    # -- lifecycle ---------------------------------------------------------

    async def on_start(self) -> None:
        if self.session is not None:
            return  # a restart keeps the running AgentSession
        stt_model, llm_model, tts_model, vad_model = self._models
        o = self.options
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
                "preemptive_generation": {"enabled": False},
            },
            user_away_timeout=None,
            aec_warmup_duration=None,
        )
        self.agent = CallAgent(
            instructions=self._instructions,
            hooks=self.hooks,
            publish=self._publish,
            call_id=self.call_id,
            tools=o.tools,
            gate=self.gate,
            send_dtmf=self._tool_dtmf,
            opening_lost=self._opening_lost,
            committed=self._on_commit,
        )
        s = self.session
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

    async def on_stop(self) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the AgentSession (idempotent)."""
        if self._closed or self.session is None:
            return
        self._closed = True
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
            self._unprotect()  # new speech may interrupt any reply again
            self._publish(UserSpeechStarted(call_id=self.call_id, at=self._now()))
        elif ev.old_state == "speaking":
            self._publish(UserSpeechStopped(call_id=self.call_id, at=self._now()))

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
        self._publish(
            UserTranscript(
                call_id=self.call_id,
                at=self._now(),
                turn_id=turn_id,
                text=ev.transcript,
                final=ev.is_final,
            )
        )

    def _on_speech_created(self, ev: SpeechCreatedEvent) -> None:
        handle = ev.speech_handle
        self._handles[handle.id] = handle
        if self.agent is not None:
            self.agent.latest_created_run = handle.id
        started = self._now()
        handle.add_done_callback(lambda h: self._on_speech_done(h, started))

    def _on_speech_done(self, handle: SpeechHandle, created_at: float) -> None:
        self._handles.pop(handle.id, None)
        text = " ".join(
            (item.text_content or "")
            for item in handle.chat_items
            if isinstance(item, llm.ChatMessage) and item.role == "assistant"
        ).strip()
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
        say = agent.blocked_say.pop(handle.id, None) if agent is not None else None
        if say and not interrupted and handle.id in self._played_runs and self.session:
            # a sentence of this reply was blocked: say the replacement after what played
            self.session.say(say)
        self._spawn_hook(self.hooks.on_agent_turn(handle.id, text, interrupted))

    def _spawn_hook(self, coro: Awaitable[None]) -> None:
        # agent-turn hooks observe only; they are owned here and awaited on close
        task = asyncio.ensure_future(coro)
        self._hook_tasks.add(task)
        task.add_done_callback(self._hook_tasks.discard)

    def _on_error(self, ev: Any) -> None:
        logger.warning(
            "agent session error",
            extra={"call_id": self.call_id, "source": type(getattr(ev, "source", None)).__name__},
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

    async def _tool_dtmf(self, digits: str) -> None:
        await self.transport.send_dtmf(digits)
        self._publish(DtmfSent(call_id=self.call_id, at=self._now(), digits=digits))

    # -- commands ----------------------------------------------------------

    async def receive(self, msg: Any) -> Any:
        await self._started.wait()
        session = self.session
        assert session is not None
        match msg:
            case Say(text=text, allow_interruptions=allow):
                return session.say(text, allow_interruptions=allow).id
            case GenerateReply(instructions=instr, user_input=user_input, protect=protect):
                kwargs: dict[str, Any] = {}
                if instr:
                    kwargs["instructions"] = instr
                if user_input:
                    kwargs["user_input"] = user_input
                if protect:
                    kwargs["allow_interruptions"] = False
                reply = session.generate_reply(**kwargs)
                if protect:
                    self._protect(reply)
                return reply.id
            case InterruptRun(run_id=run_id):
                handle = self._handles.get(run_id)
                if handle is None or handle.done():
                    return False  # stale: that run already finished
                handle.interrupt(force=True)
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
