"""Scripted fakes implementing livekit's model interfaces, for the virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from livekit.agents import llm, utils
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

__all__ = ["ScriptedLLM", "ScriptedDecisionModel", "default_reply", "user_turns"]


def user_turns(chat_ctx: llm.ChatContext) -> list[str]:
    """The caller's turns in a request (the ``[CALL_OPENING]`` marker is not one)."""
    return [
        m.text_content or ""
        for m in chat_ctx.messages()
        if m.role == "user" and (m.text_content or "") != "[CALL_OPENING]"
    ]


def default_reply(chat_ctx: llm.ChatContext) -> str:
    """A deterministic reply that depends on how many user turns there were."""
    return (
        f"Thanks, this is Sam from Acme Dental. This is reply number {len(user_turns(chat_ctx))}."
    )


class ScriptedLLM(llm.LLM):
    """An ``llm.LLM`` that streams scripted replies word by word.

    Args:
        reply: a list of replies used in turn (the last repeats), or a function of the chat.
        token_delay: loop seconds between streamed words (virtual time in tests).
        fail: raise this from every stream (to test error paths).
        tool_calls: which requests (1-based) end with a call of which tool.
    """

    def __init__(
        self,
        reply: list[str] | Callable[[llm.ChatContext], str] = default_reply,
        *,
        token_delay: float = 0.0,
        fail: Exception | None = None,
        tool_calls: dict[int, str] | None = None,
    ) -> None:
        super().__init__()
        self._reply = reply
        self.token_delay = token_delay
        self.fail = fail
        #: request number (1-based) -> name of a tool the reply calls after its text
        self.tool_calls = tool_calls or {}
        self.requests: list[llm.ChatContext] = []

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def provider(self) -> str:
        return "tests"

    def next_reply(self, chat_ctx: llm.ChatContext) -> str:
        if callable(self._reply):
            return self._reply(chat_ctx)
        i = min(len(self.requests) - 1, len(self._reply) - 1)
        return self._reply[i]

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        self.requests.append(chat_ctx.copy())
        return _ScriptedStream(
            self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options
        )


class _ScriptedStream(llm.LLMStream):
    async def _run(self) -> None:
        owner = self._llm
        assert isinstance(owner, ScriptedLLM)
        if owner.fail is not None:
            raise owner.fail
        text = owner.next_reply(self._chat_ctx)
        request_id = utils.shortuuid("fake_")
        words = text.split(" ")
        for i, word in enumerate(words):
            if owner.token_delay:
                await asyncio.sleep(owner.token_delay)
            piece = word if i == 0 else " " + word
            self._event_ch.send_nowait(
                llm.ChatChunk(id=request_id, delta=llm.ChoiceDelta(role="assistant", content=piece))
            )
        tool = owner.tool_calls.get(len(owner.requests))
        if tool is not None:
            call = llm.FunctionToolCall(name=tool, arguments="{}", call_id=f"{request_id}_tool")
            self._event_ch.send_nowait(
                llm.ChatChunk(
                    id=request_id, delta=llm.ChoiceDelta(role="assistant", tool_calls=[call])
                )
            )


class ScriptedDecisionModel(llm.DecisionModel):
    """An ``llm.DecisionModel`` whose answers come from a function of the input text.

    Args:
        answer: ``answer(input, name)`` -> a probability (float), a choice (str), or
            None for "no result" (the decision goes to ``errors``).
        delay: loop seconds each evaluation takes (virtual time in tests).
        fail: raise this from every evaluation.
        hang: never answer (until cancelled).
    """

    def __init__(
        self,
        answer: Callable[[str, str], float | str | None] | None = None,
        *,
        delay: float = 0.0,
        fail: Exception | None = None,
        hang: bool = False,
    ) -> None:
        super().__init__(
            capabilities=llm.DecisionCapabilities(decision_kinds=["probability", "choice", "score"])
        )
        self._answer = answer or (lambda text, name: 0.0)
        self.delay = delay
        self.fail = fail
        self.hang = hang
        #: every input evaluated, in order (started, not necessarily finished)
        self.inputs: list[str] = []
        self.cancelled = 0

    @property
    def model(self) -> str:
        return "scripted-decisions"

    @property
    def provider(self) -> str:
        return "tests"

    async def _evaluate_impl(
        self,
        *,
        input: str,
        decisions: Mapping[str, llm.Decision],
        conn_options: APIConnectOptions,
    ) -> llm.DecisionResponse:
        self.inputs.append(input)
        try:
            if self.hang:
                await asyncio.Event().wait()
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail is not None:
            raise self.fail
        results: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, decision in decisions.items():
            value = self._answer(input, name)
            if value is None:
                errors[name] = "no answer"
            elif isinstance(decision, llm.Choice):
                results[name] = llm.ChoiceResult(value=str(value))
            elif isinstance(decision, llm.Score):
                probs = {i: (1.0 if i == int(value) else 0.0) for i in range(len(decision.levels))}
                results[name] = llm.ScoreResult(
                    value=float(value), probabilities=probs, levels=list(decision.levels)
                )
            else:
                results[name] = llm.ProbabilityResult(value=float(value))
        return llm.DecisionResponse(results=results, errors=errors)
