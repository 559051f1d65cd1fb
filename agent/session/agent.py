"""CallAgent: the livekit ``Agent`` a call runs, and the seams the guardrail fills.

:class:`SessionHooks` is called on each completed user turn (inside
``Agent.on_user_turn_completed``), on each agent sentence between the LLM text
stream and TTS (``Agent.llm_node`` is wrapped by :class:`SentenceGate`), on a
whole reply in buffered mode, and (by the session actor) on each agent turn.
:class:`ReplyGate` is the call controller's say over automatic replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from livekit.agents import Agent, function_tool, llm
from livekit.agents.llm import StopResponse

from agent.core.messages import AgentSentence, ControlMarkerSeen, HangUp, UserTurnCompleted
from agent.session.latency import LatencyRecorder
from agent.session.markers import CALL_OPENING, MarkerFilter
from agent.session.sentences import SentenceGate, _split_chunk, split_sentences

__all__ = ["ALLOW", "CallAgent", "ReplyGate", "SessionHooks", "TurnVerdict"]


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


class ReplyGate:
    """Whether the session may answer a completed callee turn by itself.

    The call controller owns it: while AMD has not found a person (or while the
    controller's own opening reply is in flight) callee turns go into the
    history without an automatic reply, and the controller decides what is said.
    """

    def __init__(self, open: bool = True) -> None:
        self._listeners: list[Callable[[], None]] = []
        self._open = open
        self._opening_in_flight = False
        #: the controller's opening reply: its run id and instructions
        self.opening_run: str | None = None
        self.opening_instructions: str | None = None

    @property
    def open(self) -> bool:
        """Whether the controller lets the session answer callee turns by itself."""
        return self._open

    @open.setter
    def open(self, value: bool) -> None:
        self._open = value
        self._changed()

    @property
    def opening_in_flight(self) -> bool:
        """Whether the controller's own opening reply is on its way."""
        return self._opening_in_flight

    @opening_in_flight.setter
    def opening_in_flight(self, value: bool) -> None:
        self._opening_in_flight = value
        self._changed()

    def allows(self) -> bool:
        return self.open and not self.opening_in_flight

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever :meth:`allows` may have changed."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()


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
        controls: Any | None = None,
        no_reply: Callable[[str], None] | None = None,
        live: Callable[[], bool] | None = None,
        warm_transfer: Callable[[str, llm.ChatContext], Awaitable[str]] | None = None,
        latency: LatencyRecorder | None = None,
        preemptive: bool = False,
        reply_ready: Callable[[str], None] | None = None,
        pending: Callable[[str], bool] | None = None,
        quiet_for: Callable[[], float | None] | None = None,
        quiet_before_reply: float = 0.0,
    ) -> None:
        # preemptive generation (LLM and TTS start on the final transcript, before the
        # turn is committed) is switched on only while the reply gate allows automatic
        # replies: a reply nobody may speak would only take CPU from STT and AMD
        self._preemptive = preemptive
        super().__init__(
            instructions=instructions,
            tools=tools or [],
            turn_handling={"preemptive_generation": {"enabled": False, "preemptive_tts": True}},
        )
        self._latency = latency
        self._reply_ready = reply_ready or (lambda turn_id: None)
        # a preemptive reply is not a run until livekit keeps it: what it would tell the
        # call (its sentences, its control markers) waits, and is dropped if it is not kept
        self._pending = pending or (lambda run_id: False)
        self._held: dict[str, list[Any]] = {}
        # seconds since the callee's speech last ended (None: speaking, or never spoke),
        # and how long of that a reply's first audio waits for
        self._quiet_for = quiet_for or (lambda: None)
        self._quiet_before_reply = quiet_before_reply
        #: runs that opened the call (kept for the call; ``opening_runs`` empties)
        self.openings: set[str] = set()
        self._warm_transfer = warm_transfer
        self._controls = controls
        self._no_reply = no_reply or (lambda turn_id: None)
        self._live = live or (lambda: True)
        #: the callee turn the next automatic reply answers (set when a turn is let through)
        self.replying_turn: str | None = None
        #: runs that are the call's opening: their first request sees [CALL_OPENING]
        self.opening_runs: set[str] = set()
        #: runs whose text stream raised (the session settles them ``failed``)
        self.failed_runs: set[str] = set()
        self._opening_lost = opening_lost or (lambda: False)
        self._committed = committed or (lambda text: False)
        self._base_tools = list(tools or [])
        # the call-control tools, found on the class while the agent is not running;
        # send_dtmf is offered only in IVR replies
        self._control_tools = {
            name: t
            for t in self._tools
            if (name := _tool_name(t)) in ("end_call", "send_dtmf", "transfer_call")
        }
        # send_dtmf is offered only in IVR replies; transfer_call only for warm transfers
        offered = {"end_call", "transfer_call"} if warm_transfer else {"end_call"}
        self._tools = [
            t
            for t in self._tools
            if _tool_name(t) not in self._control_tools or _tool_name(t) in offered
        ]
        self._gate = gate or ReplyGate()
        self._gate.on_change(self._follow_gate)
        self._follow_gate()
        self._send_dtmf = send_dtmf
        self._hooks = hooks
        self._publish = publish
        self._call_id = call_id
        self._turns = 0
        #: run id -> what to say after that reply, because a sentence of it was blocked
        self.blocked_say: dict[str, str] = {}
        self.latest_created_run: str | None = None

    def _follow_gate(self) -> None:
        # livekit reads the agent's turn handling each time a final transcript could start
        # a preemptive reply (AgentActivity.preemptive_generation_opts); there is no public
        # setter for it on a running agent, so the dict given to Agent.__init__ is updated
        opts = self._turn_handling.get("preemptive_generation")
        if isinstance(opts, dict):
            opts["enabled"] = self._preemptive and self._gate.allows()

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

    @function_tool
    async def transfer_call(self, target: str) -> str:
        """Transfer the caller to a person: they are briefed first, then connected.

        Args:
            target: One of the transfer names from your instructions, for example "billing".
        """
        if self._warm_transfer is None:
            return "Transfers are not available on this call."
        return await self._warm_transfer(target, self.chat_ctx.copy())

    def call_tools(self, *, end_call: bool, send_dtmf: bool) -> list[Any]:
        """The tool list with the call-control tools switched on or off."""
        wanted = {"end_call"} if end_call else set()
        if end_call and self._warm_transfer is not None:
            wanted.add("transfer_call")
        if send_dtmf:
            wanted.add("send_dtmf")
        own = [t for name, t in self._control_tools.items() if name in wanted]
        return [*self._base_tools, *own]

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        text = new_message.text_content or ""
        self.replying_turn = None
        recorded = self._committed(text)  # already recorded while a reply was protected
        controls = self._controls
        if controls is not None and not recorded:
            kept = controls.on_user_text(text)
            if kept != text:
                # a spoken PIN or passphrase is never kept in the history or transcripts
                new_message.content = [kept]
                text = kept
        if not recorded:
            self._turns += 1
            loop = asyncio.get_running_loop()
            self._publish(
                UserTurnCompleted(
                    call_id=self._call_id,
                    at=loop.time(),
                    turn_id=f"turn_{self._turns}",
                    text=text,
                    context=controls.trust.context() if controls is not None else None,
                )
            )
        turn_id = f"turn_{self._turns}"
        try:
            await self._user_turn(turn_ctx, new_message, text, turn_id, recorded)
        except StopResponse:
            self._no_reply(turn_id)
            raise
        self.replying_turn = turn_id
        if controls is not None and controls.context_notes:
            turn_ctx.add_message(role="system", content=controls.trust.prompt_note())
        self._reply_ready(turn_id)

    async def _user_turn(
        self,
        turn_ctx: llm.ChatContext,
        new_message: llm.ChatMessage,
        text: str,
        turn_id: str,
        recorded: bool,
    ) -> None:
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
        run_id = _reply_run_id(self.latest_created_run)
        chat_ctx = self._prepare_request(run_id, chat_ctx)
        self._mark(run_id, "llm_request")
        upstream = self._timed_llm(
            run_id, _as_async_iter(Agent.default.llm_node(self, chat_ctx, tools, model_settings))
        )
        controls = self._controls
        if controls is None or controls.markers:
            upstream = self._strip_markers(run_id, upstream)
        gate = SentenceGate(
            run_id=run_id,
            check=self._check_sentence,
            reply_check=self._check_reply if self._hooks.buffered_replies else None,
        )
        return self._record_failure(run_id, gate.process(upstream))

    def tts_node(self, text: AsyncIterable[str], model_settings: Any) -> Any:
        run_id = _reply_run_id(self.latest_created_run)
        return self._timed_tts(run_id, self._synthesise(text, model_settings))

    async def _synthesise(
        self, text: AsyncIterable[str], model_settings: Any
    ) -> AsyncIterator[Any]:
        """livekit's TTS node, with the first clause of text that comes whole synthesised apart.

        LLM replies reach TTS split by the sentence gate (livekit makes each piece its
        own segment). A controller's ``Say`` (the screener answer, the voicemail
        message) comes as one text, which livekit's TTS would synthesise a sentence at
        a time, the first audio waiting for the whole first sentence: its first
        clause is synthesised on its own, and the rest while that plays.
        """
        chunks = aiter(text)
        first = await anext(chunks, None)
        if first is None:
            return
        pieces, rest = split_sentences(first, final=False, first_clause=True)
        if pieces and (rest or len(pieces) > 1):
            head, first = pieces[0], first[len(pieces[0]) :]
            async for frame in _as_async_iter(
                Agent.default.tts_node(self, _texts(head), model_settings)
            ):
                yield frame
        async for frame in _as_async_iter(
            Agent.default.tts_node(self, _texts(first, chunks), model_settings)
        ):
            yield frame

    def _mark(self, run_id: str, milestone: str) -> None:
        if self._latency is not None:
            self._latency.mark(run_id, milestone, asyncio.get_running_loop().time())

    async def _timed_llm(self, run_id: str, upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass the LLM stream through; note its first token and its prompt-cache usage."""
        first = True
        try:
            async for chunk in upstream:
                if first and _split_chunk(chunk)[0]:
                    first = False
                    self._mark(run_id, "llm_first_token")
                usage = getattr(chunk, "usage", None)
                if usage is not None and self._latency is not None:
                    self._latency.tokens(run_id, usage.prompt_tokens, usage.prompt_cached_tokens)
                yield chunk
        finally:
            await upstream.aclose()  # type: ignore[attr-defined]

    async def _timed_tts(self, run_id: str, upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass the TTS audio through; note when its first frame was ready."""
        first = True
        try:
            async for frame in upstream:
                if first:
                    first = False
                    self._mark(run_id, "tts_first_audio")
                    await self._wait_for_callee_pause()
                yield frame
        finally:
            await upstream.aclose()  # type: ignore[attr-defined]

    async def _wait_for_callee_pause(self) -> None:
        """Hold a reply's first audio while the callee is speaking.

        A reply prepared in a pause (preemptive, or an opening started on AMD's
        verdict) must not start over a callee who went on talking: it waits here.
        If the callee talks on past ``min_interruption_duration``, livekit interrupts
        the reply and nothing of it is heard; a short sound (a cough, an "uh") lets
        it play once the VAD hears silence. Replies that cannot be interrupted (a
        voicemail message) are not held, and no hold lasts past
        :data:`MAX_FIRST_AUDIO_HOLD`.

        The call's opening also waits until the callee has been quiet for
        ``quiet_before_reply`` seconds after the VAD's end of speech, protected or
        not. AMD decides on a short pause, and the opening must not start in a pause
        shorter than the one the session waits for before it ends a turn (a callee
        who says "Hello? Yeah," and goes on after half a second). Other replies
        answer a turn the endpointing has already ended.
        """
        session = self._session_or_none()
        if session is None:
            return
        handle = _reply_handle()
        opening = handle is not None and str(handle.id) in self.openings
        if handle is not None and not handle.allow_interruptions and not opening:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_FIRST_AUDIO_HOLD
        while (left := deadline - loop.time()) > 0:
            if session.user_state == "speaking":
                if handle is not None and not handle.allow_interruptions:
                    return  # a protected opening is not held over speech: livekit's rule
                await self._until_quiet(session, left)
                if not opening:
                    return
                continue
            if not opening:
                return
            quiet = self._quiet_for()
            # a millisecond's tolerance: a shorter sleep may not move a clock that
            # reads tens of seconds (float spacing), and the hold would spin
            if quiet is None or quiet >= self._quiet_before_reply - _HOLD_TOLERANCE:
                return
            await asyncio.sleep(min(self._quiet_before_reply - quiet, left))

    @staticmethod
    async def _until_quiet(session: Any, within: float) -> None:
        """Wait until the VAD hears the callee stop (at most ``within`` seconds)."""
        quiet = asyncio.Event()

        def changed(ev: Any) -> None:
            if ev.new_state != "speaking":
                quiet.set()

        session.on("user_state_changed", changed)
        try:
            await asyncio.wait_for(quiet.wait(), within)
        except TimeoutError:
            pass
        finally:
            session.off("user_state_changed", changed)

    def _session_or_none(self) -> Any:
        try:
            return self.session
        except RuntimeError:  # not running inside a session (unit tests)
            return None

    def _prepare_request(self, run_id: str, chat_ctx: llm.ChatContext) -> llm.ChatContext:
        """This request's context: the opening marker and the watchdog's reminders.

        Neither is saved: livekit hands ``llm_node`` the context of this
        generation, and the copy here keeps it that way.
        """
        opening = run_id in self.opening_runs
        reminders = self._controls.on_request(run_id) if self._controls is not None else []
        if not opening and not reminders:
            return chat_ctx
        ctx = chat_ctx.copy()
        for text in reminders:
            ctx.add_message(role="system", content=text)
        if opening:
            # the first request of the opening run sees the marker as the latest user
            # turn (the prompt rules name it); later tool steps do not
            self.opening_runs.discard(run_id)
            ctx.add_message(role="user", content=CALL_OPENING)
        return ctx

    async def _strip_markers(self, run_id: str, upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Remove control markers from the text; publish each; stop after an ending one."""
        flt = MarkerFilter()
        try:
            async for chunk in upstream:
                text, passthrough = _split_chunk(chunk)
                if text:
                    clean, found = flt.feed(text)
                    self._markers_found(run_id, found)
                    if clean:
                        yield clean
                if flt.done:
                    return  # the sentence with the marker is finished: nothing else is said
                if passthrough is not None:
                    yield passthrough
            clean, found = flt.flush()
            self._markers_found(run_id, found)
            if clean:
                yield clean
        finally:
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _markers_found(self, run_id: str, found: list[Any]) -> None:
        if not found or not self._live():
            return
        loop = asyncio.get_running_loop()
        for m in found:
            self._publish_for(
                run_id,
                ControlMarkerSeen(
                    call_id=self._call_id, at=loop.time(), run_id=run_id, marker=m.kind, arg=m.arg
                ),
            )

    def _publish_for(self, run_id: str, msg: Any) -> None:
        """Publish what ``run_id`` did now, or once it is kept if it is still preemptive."""
        if self._pending(run_id):
            self._held.setdefault(run_id, []).append(msg)
        else:
            self._publish(msg)

    def run_kept(self, run_id: str) -> None:
        """livekit kept preemptive reply ``run_id``: what it held back is published now."""
        for msg in self._held.pop(run_id, []):
            self._publish(msg)

    def run_dropped(self, run_id: str) -> None:
        """Preemptive reply ``run_id`` was discarded: nothing it did is told."""
        self._held.pop(run_id, None)

    async def _record_failure(self, run_id: str, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            async for item in stream:
                yield item
        except Exception:
            self.failed_runs.add(run_id)
            raise

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
        self._publish_for(
            run_id,
            AgentSentence(
                call_id=self._call_id, at=loop.time(), run_id=run_id, index=index, text=text
            ),
        )


#: the longest a reply's first audio waits for the callee to pause (seconds); livekit
#: interrupts a held reply long before, once the callee has talked on for
#: ``min_interruption_duration``
MAX_FIRST_AUDIO_HOLD = 3.0
#: seconds of callee silence a held reply may start short of (see _wait_for_callee_pause)
_HOLD_TOLERANCE = 1e-3


def _tool_name(tool: Any) -> str | None:
    info = getattr(tool, "info", None)
    return getattr(info, "name", None)


async def _texts(first: str, more: AsyncIterator[str] | None = None) -> AsyncIterator[str]:
    """``first``, then what ``more`` still has."""
    yield first
    if more is not None:
        async for chunk in more:
            yield chunk


def _reply_handle() -> Any:
    """The speech handle of the reply being generated (see :func:`_reply_run_id`)."""
    try:
        from livekit.agents.voice.agent_activity import _SpeechHandleContextVar
    except ImportError:  # pragma: no cover - depends on the livekit version
        return None
    return _SpeechHandleContextVar.get(None)


def _reply_run_id(fallback: str | None) -> str:
    """The id of the speech handle this LLM generation belongs to.

    livekit offers no public accessor for the reply's speech handle inside
    ``llm_node``. Its reply task carries the handle in the context variable
    ``agent_activity._SpeechHandleContextVar`` (livekit's own ``Agent`` code reads
    it the same way), so we read it; if that private name ever disappears we
    fall back to the most recently created handle (``speech_created`` fires just
    before livekit starts the reply task).
    """
    handle = _reply_handle()
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
