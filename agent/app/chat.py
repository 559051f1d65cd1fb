"""Talk to an agent in text: the same call composition and session loop as a phone call.

:class:`ChatSession` runs one conversation through :func:`agent.app.call.run_call`
over a :class:`~agent.telephony.chat_line.ChatLine` (channel ``chat``, direction
``inbound``: the agent opens with the ``[CALL_OPENING]`` turn). Tests drive it
with :meth:`ChatSession.send`; ``python -m agent chat`` drives it from the
terminal. Guardian questions go to a :class:`~agent.trust.guardian.GuardianDesk`,
which the terminal can answer (``/answer ID TEXT``) and, with a port, an HTTP
endpoint too.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.app.call import CallOutcome, ModelSet, new_call_id, run_call
from agent.app.config import AgentConfig
from agent.core import ALL, Bus
from agent.core.messages import Channel
from agent.telephony.chat_line import ChatLine
from agent.telephony.sim.io import TranscriptFeedSTT
from agent.trust.desk import GuardianDesk

__all__ = ["ChatSession", "ChatReply", "text_models"]


@dataclass(frozen=True)
class ChatReply:
    """What the agent answered to one typed turn (all it said until the turn settled)."""

    text: str
    outcome: str
    turn_id: str | None


def text_models(config: AgentConfig) -> ModelSet:
    """The text channel's models: the configured LLM, typed turns in, estimated speech out."""
    from agent.app.guarding import GuardrailFactory
    from agent.models.registry import build_llm, build_tts

    m = config.models
    main_llm = build_llm(m.llm, base_url=m.llm_base_url, **m.llm_options)
    return ModelSet(
        stt=TranscriptFeedSTT(),
        llm=main_llm,
        tts=build_tts(m.text_only_tts, sample_rate=m.tts_sample_rate),
        vad=None,
        turn_detection="stt",
        guardrails=GuardrailFactory(session_llm=main_llm, base_url=m.llm_base_url),
    )


class ChatSession:
    """One text conversation with an agent.

    Args:
        config: the agent config.
        models: the models (:func:`text_models`); a fresh transcript feed is used.
        desk: where guardian questions go (a new desk when None).
        channel: ``chat`` (default), or ``voice`` to drive a phone-call turn
            policy (strict side effects) in text.
        caller_number: who is typing (default: the config's ``caller_number``).
        on_event: called with every bus message (the terminal prints from it).
    """

    def __init__(
        self,
        config: AgentConfig,
        models: ModelSet,
        *,
        desk: GuardianDesk | None = None,
        channel: Channel = "chat",
        caller_number: str | None = None,
        on_event: Callable[[Any], None] | None = None,
    ) -> None:
        self.config = config
        self.models = dataclasses.replace(
            models, stt=TranscriptFeedSTT(), vad=None, turn_detection="stt"
        )
        self.desk = desk or GuardianDesk()
        self.channel = channel
        self.caller_number = caller_number
        self.call_id = new_call_id()
        self.bus = Bus(self.call_id)
        self._inputs: asyncio.Queue[str | None] = asyncio.Queue()
        assert isinstance(self.models.stt, TranscriptFeedSTT)
        self.line = ChatLine(bus=self.bus, stt=self.models.stt, next_input=self._inputs.get)
        self.messages: list[Any] = []
        self._waiters: list[tuple[Callable[[Any], bool], asyncio.Future[Any]]] = []
        self._task: asyncio.Task[CallOutcome] | None = None
        self._on_event = on_event
        self.bus.subscribe(ALL, self._seen)

    def _seen(self, msg: Any) -> None:
        self.messages.append(msg)
        if self._on_event is not None:
            self._on_event(msg)
        for pred, fut in list(self._waiters):
            if not fut.done() and pred(msg):
                fut.set_result(msg)

    async def _wait_for(self, pred: Callable[[Any], bool], since: int = 0) -> Any:
        for msg in self.messages[since:]:
            if pred(msg):
                return msg
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        try:
            return await fut
        finally:
            self._waiters = [(p, f) for p, f in self._waiters if f is not fut]

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> str:
        """Connect; returns the agent's opening turn (empty if it said nothing)."""
        self._task = asyncio.ensure_future(
            run_call(
                call_id=self.call_id,
                bus=self.bus,
                direction="inbound",
                line=self.line,
                config=self.config,
                models=self.models,
                channel=self.channel,
                caller_number=self.caller_number,
                desk=self.desk,
                # nothing of a text conversation needs a long goodbye: leave promptly
                shutdown_grace=0.5,
            )
        )
        first = await self._wait_for(
            lambda m: (m.kind == "turn_settled" and m.run_id is not None) or m.kind == "call_ended"
        )
        return first.text if first.kind == "turn_settled" else ""

    async def send(self, text: str) -> ChatReply:
        """Type one turn; returns once the reply to it has settled (or the call ended)."""
        if self._task is not None and (
            self._task.done() or any(m.kind == "call_ended" for m in self.messages)
        ):
            return ChatReply("", "aborted", None)  # the call is over: nobody is listening
        since = len(self.messages)
        await self._inputs.put(text)
        turn = await self._wait_for(
            lambda m: m.kind in ("user_turn_completed", "call_ended"), since
        )
        if turn.kind == "call_ended":
            return ChatReply("", "aborted", None)
        settled = await self._wait_for(
            lambda m: (
                (m.kind == "turn_settled" and m.turn_id == turn.turn_id) or m.kind == "call_ended"
            ),
            since,
        )
        if settled.kind == "call_ended":
            return ChatReply("", "aborted", turn.turn_id)
        return ChatReply(settled.text, settled.outcome, turn.turn_id)

    def press(self, digits: str) -> None:
        """Type keypad digits (a PIN, a menu choice)."""
        self.line.press(digits)

    async def close(self) -> CallOutcome:
        """Leave the conversation; returns how the call ended."""
        assert self._task is not None, "start() first"
        if not self._task.done():
            await self._inputs.put(None)
        outcome = await self._task
        await self.line.aclose()
        return outcome

    @property
    def outcome(self) -> CallOutcome | None:
        return self._task.result() if self._task is not None and self._task.done() else None

    async def wait_ended(self) -> CallOutcome:
        assert self._task is not None, "start() first"
        return await asyncio.shield(self._task)

    async def __aenter__(self) -> ChatSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            await self.close()
