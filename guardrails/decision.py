"""DecisionGuardrail: decision-model checks on user turns, agent sentences and agent turns.

Usage (the Python API; the same checks can be declared in YAML, see
:mod:`guardrails.config`)::

    guardrail = DecisionGuardrail(session, model=RulesDecisionModel())

    @guardrail.on_user_turn(decisions={"abusive": Probability("The caller is abusive.")})
    def before_reply(ev: DecisionEvaluated) -> Block | Steer | None:
        if ev.value("abusive", 0.0) > 0.8:
            return Block(say="I'm going to end the call here.", end_call=True)
        return None

Semantics:

- A hook may have several handlers, each with its own decisions, ``on_error``
  and ``timeout``; they run concurrently. The first :class:`Block` (in
  registration order) wins; otherwise every :class:`Steer` applies.
- ``on_error`` ("allow" or "block") decides what a failed check means: the
  evaluation raises or times out, any decision comes back without a result, or
  the handler raises. The timeout covers the evaluation and an async handler
  together.
- Eager evaluation of user turns: :meth:`DecisionGuardrail.prefetch` starts the
  model on the turn so far (each final transcript), cancelling the previous
  request; the end-of-turn check reuses a result only when the model saw
  exactly the same input.
- One guardrail per session: the session object holds it in ``session.guardrail``;
  creating a second raises, :meth:`DecisionGuardrail.aclose` frees the slot.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from livekit.agents import llm

logger = logging.getLogger("guardrails")

__all__ = [
    "Block",
    "Steer",
    "DecisionEvaluated",
    "DecisionGuardrail",
    "GuardrailOutcome",
    "CheckOutcome",
    "GuardrailSlotError",
    "Hook",
    "OnError",
    "merge_outcomes",
    "transcript_input",
]

Hook = Literal["on_user_turn", "on_agent_sentence", "on_agent_turn"]
OnError = Literal["allow", "block"]
HOOKS: tuple[Hook, ...] = ("on_user_turn", "on_agent_sentence", "on_agent_turn")


@dataclass(frozen=True)
class Block:
    """Stop what the hook guards.

    On a user turn: no reply (the message stays in history), ``say`` is spoken if
    given. On an agent sentence: the sentence and everything after it is dropped,
    the LLM is cancelled, ``say`` is spoken after the reply unless interrupted.
    ``end_call`` hangs up after ``say`` has played (telephony extension).
    """

    say: str | None = None
    end_call: bool = False


@dataclass(frozen=True)
class Steer:
    """Add ``instructions`` as a system message to this turn's reply context only."""

    instructions: str


#: Which handler results each hook accepts.
_ALLOWED: dict[str, tuple[type, ...]] = {
    "on_user_turn": (Block, Steer),
    "on_agent_sentence": (Block,),
    "on_agent_turn": (),
}


class GuardrailSlotError(RuntimeError):
    """A session already has a DecisionGuardrail."""


@dataclass(frozen=True)
class DecisionEvaluated:
    """What a handler receives: the model's results for one check.

    Attributes:
        hook: which hook ran the check.
        input: the text the model saw.
        results: decision name -> livekit result (probability, choice or score).
        errors: decision name -> error, for decisions without a result.
        latency: seconds the evaluation took (loop clock).
        reused: the result came from eager evaluation of the same input.
    """

    hook: Hook
    input: str
    results: Mapping[str, llm.DecisionResult]
    errors: Mapping[str, str]
    latency: float
    reused: bool = False

    def value(self, name: str, default: Any = None) -> Any:
        """The value of decision ``name`` (float for probability/score, str for choice)."""
        result = self.results.get(name)
        return default if result is None else result.value

    def values(self) -> dict[str, float | str]:
        """Every decision's value."""
        return {name: r.value for name, r in self.results.items()}


Handler = Callable[[DecisionEvaluated], Any]


@dataclass
class _Check:
    hook: Hook
    decisions: dict[str, llm.Decision]
    handler: Handler
    on_error: OnError
    timeout: float
    history: int
    name: str
    error_say: str | None = None

    def on_error_result(self) -> Block | None:
        return Block(say=self.error_say) if self.on_error == "block" else None


@dataclass(frozen=True)
class CheckOutcome:
    """One handler's outcome: its result (or the on_error result) and what it saw."""

    check: str
    result: Block | Steer | None
    values: dict[str, float | str]
    errors: dict[str, str]
    latency: float
    failed: bool = False
    reused: bool | None = None


@dataclass(frozen=True)
class GuardrailOutcome:
    """The merged outcome of every check on one hook invocation."""

    hook: Hook
    action: Literal["allow", "block", "steer"] = "allow"
    say: str | None = None
    instructions: str | None = None
    end_call: bool = False
    checks: tuple[CheckOutcome, ...] = ()
    latency: float = 0.0

    @property
    def values(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {}
        for c in self.checks:
            out.update(c.values)
        return out

    @property
    def errors(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for c in self.checks:
            out.update({c.check if k == "_check" else k: v for k, v in c.errors.items()})
        return out


def merge_outcomes(hook: Hook, outcomes: Sequence[CheckOutcome]) -> GuardrailOutcome:
    """Merge handler outcomes: the first Block wins; otherwise every Steer applies."""
    latency = max((o.latency for o in outcomes), default=0.0)
    for o in outcomes:
        if isinstance(o.result, Block):
            return GuardrailOutcome(
                hook,
                "block",
                say=o.result.say,
                end_call=o.result.end_call,
                checks=tuple(outcomes),
                latency=latency,
            )
    steers = [o.result.instructions for o in outcomes if isinstance(o.result, Steer)]
    if steers:
        return GuardrailOutcome(
            hook, "steer", instructions="\n".join(steers), checks=tuple(outcomes), latency=latency
        )
    return GuardrailOutcome(hook, "allow", checks=tuple(outcomes), latency=latency)


def transcript_input(history: Sequence[tuple[str, str]], text: str, role: str, n: int) -> str:
    """The model input: ``text`` alone, or the last ``n`` messages then ``role: text``.

    The format is livekit's decision transcript (one ``role: text`` line per
    message), so every backend sees the same text.
    """
    if n <= 0:
        return text
    lines = [f"{r}: {t}" for r, t in list(history)[-n:] if t.strip()]
    lines.append(f"{role}: {text}")
    return "\n".join(lines)


def _attach(session: Any, guardrail: DecisionGuardrail) -> None:
    """Put ``guardrail`` in the session's slot: through the slot's methods where the
    session declares them (the runtime's session actor), else as its ``guardrail``
    attribute (livekit's ``AgentSession``, which has no slot of its own)."""
    if isinstance(session, GuardrailSlot):
        session.attach_guardrail(guardrail)
    else:
        session.guardrail = guardrail


def _detach(session: Any, guardrail: DecisionGuardrail) -> None:
    if isinstance(session, GuardrailSlot):
        session.detach_guardrail(guardrail)
    elif getattr(session, "guardrail", None) is guardrail:
        session.guardrail = None


@runtime_checkable
class GuardrailSlot(Protocol):
    """A session that holds its one DecisionGuardrail through explicit methods."""

    @property
    def guardrail(self) -> Any: ...

    def attach_guardrail(self, guardrail: Any) -> None: ...

    def detach_guardrail(self, guardrail: Any) -> None: ...


class DecisionGuardrail:
    """Runs decision-model checks at three points of a session.

    Args:
        session: the session the guardrail belongs to (livekit's ``AgentSession`` or
            the runtime's session actor); it holds the guardrail in ``session.guardrail``.
        model: the decision model every check uses.
        timeout: default timeout of a check (evaluation and handler together).
        eager: evaluate user turns on each final transcript.

    Raises:
        GuardrailSlotError: the session already has a guardrail.
    """

    def __init__(
        self,
        session: Any,
        *,
        model: llm.DecisionModel,
        timeout: float = 2.0,
        eager: bool = True,
    ) -> None:
        if getattr(session, "guardrail", None) is not None:
            raise GuardrailSlotError(
                "this session already has a DecisionGuardrail; close it before creating another"
            )
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._session = session
        _attach(session, self)
        self.model = model
        self.timeout = timeout
        self.eager = eager
        self._checks: dict[Hook, list[_Check]] = {h: [] for h in HOOKS}
        # eager user-turn evaluations: check index -> (input, task)
        self._eager: dict[int, tuple[str, asyncio.Task[llm.DecisionResponse]]] = {}
        self._closed = False

    # -- registering handlers ------------------------------------------------

    def _decorator(
        self,
        hook: Hook,
        decisions: Mapping[str, llm.Decision],
        on_error: OnError,
        timeout: float | None,
        history: int,
        error_say: str | None,
    ) -> Callable[[Handler], Handler]:
        if on_error not in ("allow", "block"):
            raise ValueError(f"on_error must be 'allow' or 'block', not {on_error!r}")
        if not decisions:
            raise ValueError(f"{hook}: a check needs at least one decision")
        for name, d in decisions.items():
            if not isinstance(d, llm.Probability | llm.Choice | llm.Score):
                raise TypeError(f"{hook}: decision {name!r} must be a Probability, Choice or Score")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"{hook}: timeout must be positive")

        def register(fn: Handler) -> Handler:
            self._checks[hook].append(
                _Check(
                    hook=hook,
                    decisions=dict(decisions),
                    handler=fn,
                    on_error=on_error,
                    timeout=timeout or self.timeout,
                    history=max(0, history),
                    name=getattr(fn, "__name__", f"check_{len(self._checks[hook])}"),
                    error_say=error_say,
                )
            )
            return fn

        return register

    def on_user_turn(
        self,
        *,
        decisions: Mapping[str, llm.Decision],
        on_error: OnError = "allow",
        timeout: float | None = None,
        history: int = 0,
        error_say: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register a check that runs after a user turn, before the reply (Block, Steer, None).

        Args:
            decisions: the decisions the model evaluates for this handler.
            on_error: what a failed check means.
            timeout: seconds for the evaluation and the handler together.
            history: earlier messages the model also sees (0: the turn's text only).
            error_say: what a failed check that blocks says (``on_error="block"``).
        """
        return self._decorator("on_user_turn", decisions, on_error, timeout, history, error_say)

    def on_agent_sentence(
        self,
        *,
        decisions: Mapping[str, llm.Decision],
        on_error: OnError = "allow",
        timeout: float | None = None,
        history: int = 0,
        error_say: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register a check on each agent sentence before it is spoken (Block, None)."""
        return self._decorator(
            "on_agent_sentence", decisions, on_error, timeout, history, error_say
        )

    def on_agent_turn(
        self,
        *,
        decisions: Mapping[str, llm.Decision],
        on_error: OnError = "allow",
        timeout: float | None = None,
        history: int = 0,
        error_say: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register an observe-only check after each agent turn (return None)."""
        return self._decorator("on_agent_turn", decisions, on_error, timeout, history, error_say)

    def has_checks(self, hook: Hook) -> bool:
        """Whether any handler is registered on ``hook``."""
        return bool(self._checks[hook])

    @property
    def max_timeout(self) -> float:
        """The longest timeout of any check (the hooks wait a little longer)."""
        return max((c.timeout for cs in self._checks.values() for c in cs), default=self.timeout)

    # -- evaluating ------------------------------------------------------------

    def prefetch(self, text: str, history: Sequence[tuple[str, str]] = ()) -> None:
        """Start evaluating the user turn so far (eager); cancels the previous request."""
        if not self.eager or self._closed or not text.strip():
            return
        for i, check in enumerate(self._checks["on_user_turn"]):
            inp = transcript_input(history, text, "user", check.history)
            old = self._eager.get(i)
            if old is not None:
                if old[0] == inp:
                    continue
                old[1].cancel()
            self._eager[i] = (inp, asyncio.ensure_future(self._evaluate(inp, check)))

    def eager_state(self, text: str, history: Sequence[tuple[str, str]] = ()) -> str | None:
        """For measurement: "ready", "pending" or "miss" for the turn ``text`` (None: no eager)."""
        checks = self._checks["on_user_turn"]
        if not self.eager or not checks:
            return None
        states = []
        for i, check in enumerate(checks):
            entry = self._eager.get(i)
            inp = transcript_input(history, text, "user", check.history)
            if entry is None or entry[0] != inp:
                states.append("miss")
            else:
                states.append("ready" if entry[1].done() else "pending")
        for s in ("miss", "pending"):
            if s in states:
                return s
        return "ready"

    async def run(
        self,
        hook: Hook,
        text: str,
        history: Sequence[tuple[str, str]] = (),
    ) -> GuardrailOutcome:
        """Run every check of ``hook`` on ``text`` concurrently and merge the results."""
        checks = self._checks[hook]
        if not checks or self._closed:
            return GuardrailOutcome(hook)
        role = "user" if hook == "on_user_turn" else "assistant"
        outcomes = await asyncio.gather(
            *(
                self._run_check(i, c, transcript_input(history, text, role, c.history))
                for i, c in enumerate(checks)
            )
        )
        if hook == "on_user_turn":
            self._drop_eager()
        return merge_outcomes(hook, outcomes)

    async def _evaluate(self, inp: str, check: _Check) -> llm.DecisionResponse:
        return await self.model.evaluate(input=inp, decisions=check.decisions)

    async def _run_check(self, index: int, check: _Check, inp: str) -> CheckOutcome:
        loop = asyncio.get_running_loop()
        started = loop.time()
        reused: bool | None = None
        values: dict[str, float | str] = {}
        errors: dict[str, str] = {}
        try:
            async with asyncio.timeout(check.timeout):
                task: Awaitable[llm.DecisionResponse] | None = None
                if check.hook == "on_user_turn" and self.eager:
                    entry = self._eager.pop(index, None)
                    if entry is not None and entry[0] == inp and not entry[1].cancelled():
                        task, reused = entry[1], True
                    else:
                        if entry is not None:
                            entry[1].cancel()
                        reused = False
                response = await (task if task is not None else self._evaluate(inp, check))
                values = {n: r.value for n, r in response.results.items()}
                errors = dict(response.errors)
                if errors:
                    raise _DecisionMissing(sorted(errors))
                ev = DecisionEvaluated(
                    hook=check.hook,
                    input=inp,
                    results=dict(response.results),
                    errors=errors,
                    latency=loop.time() - started,
                    reused=bool(reused),
                )
                result = check.handler(ev)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:  # TimeoutError included: on_error decides
            reason = _failure(exc)
            errors.setdefault("_check", reason)
            logger.warning(
                "guardrail check failed",
                extra={"hook": check.hook, "check": check.name, "error": reason},
            )
            return CheckOutcome(
                check=check.name,
                result=check.on_error_result(),
                values=values,
                errors=errors,
                latency=loop.time() - started,
                failed=True,
                reused=reused,
            )
        allowed = _ALLOWED[check.hook]
        if result is not None and not isinstance(result, allowed):
            # only the type is logged: the result may quote the text
            logger.warning(
                "guardrail handler returned an unsupported result",
                extra={"hook": check.hook, "check": check.name, "type": type(result).__name__},
            )
            errors["_check"] = f"unsupported result {type(result).__name__}"
            return CheckOutcome(
                check.name,
                check.on_error_result(),
                values,
                errors,
                loop.time() - started,
                True,
                reused,
            )
        assert result is None or isinstance(result, Block | Steer)
        return CheckOutcome(
            check=check.name,
            result=result,
            values=values,
            errors=errors,
            latency=loop.time() - started,
            reused=reused,
        )

    def unanswered(self, hook: Hook, reason: str) -> GuardrailOutcome:
        """The outcome when nothing could run the checks (the guardrail timed out,
        crashed or stopped): every check of ``hook`` resolves by its own ``on_error``."""
        outcomes = [
            CheckOutcome(
                check=c.name,
                result=c.on_error_result(),
                values={},
                errors={"_check": reason},
                latency=0.0,
                failed=True,
            )
            for c in self._checks[hook]
        ]
        return merge_outcomes(hook, outcomes)

    def _drop_eager(self) -> None:
        for _, task in self._eager.values():
            task.cancel()
        self._eager.clear()

    async def aclose(self) -> None:
        """Cancel evaluations in flight and free the session's guardrail slot."""
        self._closed = True
        tasks = [t for _, t in self._eager.values()]
        self._drop_eager()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        _detach(self._session, self)


@dataclass
class _DecisionMissing(Exception):
    names: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"no result for {', '.join(self.names)}"


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, _DecisionMissing):
        return str(exc)
    return f"error: {type(exc).__name__}"
