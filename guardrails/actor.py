"""GuardrailActor: the call's guardrail, answering the session's hook checks.

The session's hooks ask this actor with a timeout: after a user turn (before the
reply), for each agent sentence before it is spoken, after each agent turn, and
(in buffered reply mode) for each whole reply. Checks run concurrently: the
actor answers a check at once with a future it owns, so its mailbox stays free
for the next sentence and for final transcripts, which start eager evaluation
of the user turn so far. Every evaluation is published as a
:class:`~agent.core.messages.GuardrailEvaluated`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

from agent.core import Actor, Bus
from agent.core.messages import (
    AgentTurnCompleted,
    GuardrailCheck,
    GuardrailEvaluated,
    ResponseCheck,
    UserTranscript,
    UserTurnCompleted,
)

from .decision import DecisionGuardrail, GuardrailOutcome
from .response import CallContext, ResponseGuardrails

logger = logging.getLogger("guardrails")

__all__ = ["GuardrailActor", "CheckResult"]

#: How many earlier messages the actor keeps for checks that read history.
_HISTORY = 50


@dataclass(frozen=True)
class CheckResult:
    """The answer to a :class:`~agent.core.messages.GuardrailCheck` or a ``ResponseCheck``."""

    action: Literal["allow", "block", "steer"] = "allow"
    say: str | None = None
    instructions: str | None = None
    end_call: bool = False


ALLOW = CheckResult()


class GuardrailActor(Actor):
    """Runs the call's decision checks and response guardrails.

    Args:
        call_id: the call.
        bus: the call bus (the actor subscribes to transcripts and turns).
        guardrail: the call's DecisionGuardrail (None: no decision checks).
        response: the process's response guardrails, shared by every call (None: none).
        agent_name: the agent config's name, for response guardrails.
        reply_mode: "streamed" (response guardrails report after the reply) or
            "buffered" (they are asked before the reply is spoken).
    """

    SUBSCRIBES = ("user_transcript", "user_turn_completed", "agent_turn_completed")

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        guardrail: DecisionGuardrail | None = None,
        response: ResponseGuardrails | None = None,
        agent_name: str = "default",
        reply_mode: str = "streamed",
    ) -> None:
        super().__init__("guardrail")
        self.call_id = call_id
        self.bus = bus
        self.guardrail = guardrail
        self.response = response if response is not None and len(response) else None
        self.agent_name = agent_name
        self.reply_mode = reply_mode
        self.checks = 0
        self._finals: list[str] = []
        self._history: list[tuple[str, str]] = []
        self._last_user = ""
        if guardrail is not None or self.response is not None:
            bus.subscribe(self.SUBSCRIBES, self)

    @property
    def hook_timeout(self) -> float:
        """How long the session's hooks wait for an answer (a little over the longest check)."""
        longest = self.guardrail.max_timeout if self.guardrail is not None else 0.0
        if self.response is not None:
            longest = max([longest, *(spec.timeout for spec in self.response.specs)])
        return max(longest, 0.5) + 0.5

    def wants(self, hook: str) -> bool:
        """Whether the session should ask about ``hook`` at all."""
        if hook == "response":
            return self.response is not None and self.reply_mode == "buffered"
        if hook == "on_agent_turn" and self.response is not None:
            return True
        return self.guardrail is not None and self.guardrail.has_checks(hook)  # type: ignore[arg-type]

    async def receive(self, msg: Any) -> Any:
        match msg:
            case UserTranscript(final=True, text=text) if text.strip():
                self._finals.append(text.strip())
                if self.guardrail is not None:
                    self.guardrail.prefetch(" ".join(self._finals), self._history)
                return None
            case UserTranscript():
                return None
            case UserTurnCompleted(text=text):
                self._finals.clear()
                self._remember("user", text)
                self._last_user = text
                return None
            case AgentTurnCompleted(text=text):
                self._remember("assistant", text)
                return None
            case GuardrailCheck():
                self.checks += 1
                return self._own(self._check(msg))
            case ResponseCheck():
                self.checks += 1
                return self._own(self._response(msg, enforce=True))
        raise TypeError(f"guardrail cannot handle {getattr(msg, 'kind', msg)!r}")

    def _remember(self, role: str, text: str) -> None:
        if text.strip():
            self._history.append((role, text))
            del self._history[:-_HISTORY]

    def _own(self, coro: Any) -> asyncio.Future[CheckResult]:
        # the asker awaits the check: its failure is the asker's (the hook's on_error)
        task: asyncio.Future[CheckResult] = self.spawn(coro, name="guardrail:check", crash=False)
        return task

    def _before(self, role: str, text: str) -> list[tuple[str, str]]:
        """History before ``text`` (the turn being checked may already be in it)."""
        h = self._history
        if h and h[-1] == (role, text):
            return h[:-1]
        return list(h)

    async def _check(self, msg: GuardrailCheck) -> CheckResult:
        outcome: GuardrailOutcome | None = None
        if self.guardrail is not None and self.guardrail.has_checks(msg.hook):
            role = "user" if msg.hook == "on_user_turn" else "assistant"
            history = self._before(role, msg.text)
            eager = (
                self.guardrail.eager_state(msg.text, history)
                if msg.hook == "on_user_turn"
                else None
            )
            outcome = await self.guardrail.run(msg.hook, msg.text, history)
            self._publish(msg, outcome, eager)
        if msg.hook == "on_agent_turn" and self.response is not None:
            if self.reply_mode == "streamed":  # report-only: the reply was already spoken
                await self._response(
                    ResponseCheck(call_id=msg.call_id, at=msg.at, text=msg.text, run_id=msg.run_id),
                    enforce=False,
                )
            return ALLOW
        if outcome is None:
            return ALLOW
        return CheckResult(outcome.action, outcome.say, outcome.instructions, outcome.end_call)

    def _publish(self, msg: GuardrailCheck, outcome: GuardrailOutcome, eager: str | None) -> None:
        loop = asyncio.get_running_loop()
        self.bus.publish(
            GuardrailEvaluated(
                call_id=self.call_id,
                at=loop.time(),
                hook=msg.hook,
                action=outcome.action,
                decisions=dict(outcome.values),
                errors=outcome.errors,
                latency=round(outcome.latency, 6),
                turn_id=msg.turn_id,
                run_id=msg.run_id,
                index=msg.index,
                eager=eager,  # type: ignore[arg-type]
                end_call=outcome.end_call,
            )
        )

    async def _response(self, msg: ResponseCheck, *, enforce: bool) -> CheckResult:
        assert self.response is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        ctx = CallContext(
            call_id=self.call_id,
            agent_name=self.agent_name,
            reply=msg.text,
            user_text=msg.user_text or self._last_user,
            history=tuple(self._before("assistant", msg.text)),
            channel="voice",
            streamed=not enforce,
        )
        verdicts = await self.response.check(ctx)
        blocked, replacement = ResponseGuardrails.combine(verdicts)
        blocked = blocked and enforce
        self.bus.publish(
            GuardrailEvaluated(
                call_id=self.call_id,
                at=loop.time(),
                hook="on_agent_turn",
                action="block" if blocked else "allow",
                decisions={v.name: v.outcome for v in verdicts},
                errors={v.name: v.error for v in verdicts if v.error},
                latency=round(loop.time() - started, 6),
                run_id=msg.run_id,
                source="response",
            )
        )
        if blocked:
            return CheckResult("block", say=replacement)
        return ALLOW

    def unanswered(self, msg: GuardrailCheck | ResponseCheck, reason: str) -> CheckResult:
        """What a check the actor could not answer means: each check's own ``on_error``.

        Called by the session's hooks when the ask failed (a timeout, a crash, a
        stopped actor, a bug). A fail-closed (``on_error: block``, or ``deny`` for a
        response guardrail) check blocks; the rest allow. The evaluation is published
        with ``reason`` as its error, like any failed check.
        """
        loop = asyncio.get_running_loop()
        match msg:
            case GuardrailCheck(hook=hook):
                if self.guardrail is None or not self.guardrail.has_checks(hook):
                    return ALLOW
                outcome = self.guardrail.unanswered(hook, reason)
                self._publish(msg, outcome, None)
                if hook == "on_agent_turn":
                    return ALLOW
                return CheckResult(
                    outcome.action, outcome.say, outcome.instructions, outcome.end_call
                )
            case ResponseCheck():
                if self.response is None:
                    return ALLOW
                denying = [s for s in self.response.specs if not s.report_only]
                closed = [s for s in denying if s.on_error == "deny"]
                self.bus.publish(
                    GuardrailEvaluated(
                        call_id=self.call_id,
                        at=loop.time(),
                        hook="on_agent_turn",
                        action="block" if closed else "allow",
                        decisions={s.name: "no_verdict" for s in denying},
                        errors={s.name: reason for s in denying},
                        run_id=msg.run_id,
                        source="response",
                    )
                )
                if closed:
                    return CheckResult("block", say=closed[0].replacement)
        return ALLOW

    async def on_stop(self) -> None:
        if self.guardrail is not None:
            await self.guardrail.aclose()
