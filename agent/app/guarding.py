"""Wiring the guardrail into a call: the session's hooks, and the models it shares.

:class:`GuardrailHooks` are the session's :class:`~agent.session.actor.SessionHooks`:
they ask the call's guardrail actor, which answers at once with a future, and
wait for that future with a timeout a little over the longest check's (each
check applies its own ``timeout`` and ``on_error`` first; this bound only
covers a guardrail actor that cannot answer at all, and then each check's
``on_error`` still decides: fail-closed checks block).

:class:`GuardrailFactory` builds what is shared across calls: decision models
(one per model string) and the response guardrails (one instance of each for
the whole process, as the response-guardrail contract requires).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from livekit.agents import llm

from agent.core import ActorStopped
from agent.core.messages import GuardrailCheck, ResponseCheck
from agent.session.agent import ALLOW, SessionHooks, TurnVerdict
from guardrails.actor import CheckResult, GuardrailActor
from guardrails.config import GuardrailsConfig
from guardrails.guarded import guarded
from guardrails.response import ResponseGuardrails

logger = logging.getLogger("agent.guardrails")

__all__ = ["GuardrailHooks", "GuardrailFactory"]


class GuardrailHooks(SessionHooks):
    """Session hooks that ask the guardrail actor.

    When the actor cannot answer (a timeout, a crash, a stopped actor, a bug),
    each pending check resolves by its own ``on_error``: a sentence whose check
    fails closed is not spoken.
    """

    def __init__(self, guardrail: GuardrailActor, call_id: str) -> None:
        self.guardrail = guardrail
        self.call_id = call_id
        self.timeout = guardrail.hook_timeout
        self.buffered_replies = guardrail.wants("response")

    async def _ask(self, check: GuardrailCheck | ResponseCheck) -> TurnVerdict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        pending: asyncio.Future[CheckResult] | None = None
        try:
            pending = await self.guardrail.ask(check, timeout=self.timeout)
            res = await asyncio.wait_for(
                asyncio.shield(pending), timeout=max(0.0, deadline - loop.time())
            )
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the hook itself is cancelled (an interruption): not a failure
            # the check was cancelled under us: a crashed guardrail restarting, or stopping
            res = self._unanswered(check, "cancelled", exc)
        except Exception as exc:
            if pending is not None:
                pending.cancel()
            res = self._unanswered(check, _reason(exc), exc)
        return TurnVerdict(
            action=res.action, say=res.say, instructions=res.instructions, end_call=res.end_call
        )

    def _unanswered(
        self, check: GuardrailCheck | ResponseCheck, reason: str, exc: BaseException
    ) -> CheckResult:
        res = self.guardrail.unanswered(check, reason)
        logger.warning(
            "guardrail did not answer; each check's on_error decides",
            extra={
                "call_id": self.call_id,
                "hook": getattr(check, "hook", "response"),
                "error": reason,
                "action": res.action,
            },
            exc_info=exc,
        )
        return res

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def on_user_turn(self, turn_id: str, text: str) -> TurnVerdict:
        if not self.guardrail.wants("on_user_turn"):
            return ALLOW
        return await self._ask(
            GuardrailCheck(
                call_id=self.call_id,
                at=self._now(),
                hook="on_user_turn",
                text=text,
                turn_id=turn_id,
            )
        )

    async def on_agent_sentence(self, run_id: str, index: int, text: str) -> TurnVerdict:
        if not self.guardrail.wants("on_agent_sentence"):
            return ALLOW
        return await self._ask(
            GuardrailCheck(
                call_id=self.call_id,
                at=self._now(),
                hook="on_agent_sentence",
                text=text,
                run_id=run_id,
                index=index,
            )
        )

    async def on_agent_turn(self, run_id: str, text: str, interrupted: bool) -> None:
        if not self.guardrail.wants("on_agent_turn") or not text.strip():
            return
        await self._ask(
            GuardrailCheck(
                call_id=self.call_id, at=self._now(), hook="on_agent_turn", text=text, run_id=run_id
            )
        )

    async def on_reply(self, run_id: str, text: str) -> TurnVerdict:
        return await self._ask(
            ResponseCheck(call_id=self.call_id, at=self._now(), text=text, run_id=run_id)
        )


class GuardrailFactory:
    """Builds decision models and response guardrails once per process, cached by config.

    Args:
        session_llm: the agent's LLM (for the ``llm`` decision model).
        base_url: an OpenAI-compatible server for ``llm:openai/<model>``.
        model: a prebuilt decision model used for every config (tests).
    """

    def __init__(
        self,
        *,
        session_llm: llm.LLM | None = None,
        base_url: str | None = None,
        model: llm.DecisionModel | None = None,
    ) -> None:
        self._session_llm = session_llm
        self._base_url = base_url
        self._fixed = model
        self._models: dict[tuple[Any, ...], llm.DecisionModel] = {}
        self._response: dict[str, ResponseGuardrails] = {}

    def _build(self, spec: str, packs: tuple[str, ...]) -> llm.DecisionModel:
        from agent.models.registry import build_decision_model

        key = (spec, packs)
        if key not in self._models:
            self._models[key] = build_decision_model(
                spec, session_llm=self._session_llm, base_url=self._base_url, pack_dirs=packs
            )
        return self._models[key]

    def decision_model(self, config: GuardrailsConfig) -> llm.DecisionModel:
        """The decision model of ``config`` (guarded by its fallback when it has one)."""
        if self._fixed is not None:
            return self._fixed
        packs = tuple(config.packs)
        key = (config.model, config.fallback, config.fallback_timeout, packs)
        if key not in self._models:
            primary = self._build(config.model, packs)
            if config.fallback is None:
                return primary
            fallback = self._build(config.fallback, packs)
            self._models[key] = guarded(primary, fallback, config.fallback_timeout)
        return self._models[key]

    def named(self, spec: str) -> llm.DecisionModel | None:
        """The decision model a registry string names (None for an empty string)."""
        return self._build(spec, ()) if spec else None

    def response(self, config: GuardrailsConfig) -> ResponseGuardrails | None:
        """The response guardrails of ``config``: built once, shared by every call."""
        if not config.response:
            return None
        key = json.dumps(
            [spec.model_dump() for spec in config.response], sort_keys=True, default=str
        )
        if key not in self._response:
            built = ResponseGuardrails.build(
                config.response,
                decision_model=lambda spec: self._build(spec, tuple(config.packs)),
            )
            built.check_binding(streamed=config.reply_mode == "streamed")
            self._response[key] = built
        return self._response[key]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ActorStopped):
        return "guardrail stopped"
    return f"error: {type(exc).__name__}"
