"""Response guardrails: decide once per agent reply whether it may be returned.

A response guardrail sees the agent's whole reply (with the user turn it answers and
the conversation so far) and returns a decision:

- :class:`Allow`: the reply may be returned.
- :class:`Deny`: the reply is refused. The runtime speaks ``Deny.replacement`` (or the
  entry's configured ``replacement``) instead, if any.
- :class:`Fail`: the guardrail reached *no verdict*. Raising an exception, returning
  :class:`Fail`, a failed awaitable from :meth:`AgentResponseGuardrail.decide_async`,
  a timeout and a result that is not a decision are all equivalent. No verdict is not
  a refusal: the entry's ``on_error`` ("allow" by default, or "deny") says what it means
  for an enforcing guardrail.

Implementations implement :meth:`AgentResponseGuardrail.decide` (it may block: the
default :meth:`AgentResponseGuardrail.decide_async` runs it in a worker thread of the
loop's default executor), or override :meth:`AgentResponseGuardrail.decide_async` (then
``decide`` is never called and may simply raise ``NotImplementedError``). A guardrail's
constructor takes no arguments or one :class:`GuardrailContext` (its configured name and
``config`` section).

:class:`ResponseGuardrails` builds ONE instance of each configured guardrail per process,
and that instance is shared by every concurrent call, from any agent, possibly from
several worker threads at once. An implementation must therefore be thread safe: keep
no mutable per-call state on ``self``; everything about a call is in
:class:`CallContext`.

An entry with ``report_only: true`` is evaluated and reported but never blocks. A
streamed reply has already been spoken when it can be checked, so only report-only
guardrails may be bound to streamed replies: :meth:`ResponseGuardrails.check_binding`
refuses an enforcing guardrail on a streamed reply at startup.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from livekit.agents import llm

__all__ = [
    "AgentResponseGuardrail",
    "Allow",
    "CallContext",
    "Deny",
    "Fail",
    "GuardrailConfigError",
    "GuardrailContext",
    "ResponseDecision",
    "ResponseGuardrailError",
    "ResponseGuardrailSpec",
    "ResponseGuardrails",
    "ResponseVerdict",
]

logger = logging.getLogger(__name__)

DecisionModelFactory = Callable[[str], llm.DecisionModel]


@dataclass(frozen=True)
class Allow:
    """The reply may be returned."""


@dataclass(frozen=True)
class Deny:
    """The reply is refused.

    Attributes:
        reason: Why, for reports and logs. Do not quote the reply.
        replacement: What to say instead; None falls back to the entry's ``replacement``.
    """

    reason: str
    replacement: str | None = None


@dataclass(frozen=True)
class Fail:
    """The guardrail reached no verdict (not a refusal; ``on_error`` decides).

    Attributes:
        reason: What went wrong, for reports and logs. Do not quote the reply.
    """

    reason: str


ResponseDecision = Allow | Deny | Fail


@dataclass(frozen=True)
class GuardrailContext:
    """What a guardrail's constructor may receive.

    Attributes:
        name: The entry's configured name.
        config: The entry's ``config`` section.
        decision_model: Builds an ``llm.DecisionModel`` from a model string, if the
            process has one (the factory given to :meth:`ResponseGuardrails.build`).
    """

    name: str
    config: Mapping[str, Any]
    decision_model: DecisionModelFactory | None = None


@dataclass(frozen=True)
class CallContext:
    """Everything a guardrail knows about one reply.

    Attributes:
        call_id: The call the reply belongs to.
        agent_name: The agent that produced the reply.
        reply: The agent's whole reply text.
        user_text: The user turn the reply answers ("" when there is none).
        history: The conversation before this reply, as (role, text) pairs.
        channel: "voice" for phone calls.
        streamed: Whether the reply was already streamed out as it was generated.
    """

    call_id: str
    agent_name: str
    reply: str
    user_text: str = ""
    history: tuple[tuple[str, str], ...] = ()
    channel: str = "voice"
    streamed: bool = False


class AgentResponseGuardrail(ABC):
    """Decides once per agent reply whether the reply may be returned.

    One instance is shared by every concurrent call, so implementations must be thread
    safe. Implement :meth:`decide` (blocking is fine), or override :meth:`decide_async`
    and let ``decide`` raise ``NotImplementedError``.
    """

    @abstractmethod
    def decide(self, ctx: CallContext) -> ResponseDecision:
        """Decide whether the reply described by ``ctx`` may be returned.

        This is the method to implement. It runs in a worker thread and may block.
        Returning :class:`Fail` and raising are equivalent: both mean no verdict,
        which is distinct from :class:`Deny`.

        Args:
            ctx: The reply and its call.

        Returns:
            The decision.
        """

    async def decide_async(self, ctx: CallContext) -> ResponseDecision:
        """Async variant of :meth:`decide`, for implementations that await I/O.

        The default runs :meth:`decide` in the loop's default executor. When this is
        overridden, :meth:`decide` is not used. Returning :class:`Fail`, raising and
        awaiting something that fails all mean no verdict.

        Args:
            ctx: The reply and its call.

        Returns:
            The decision.
        """
        # The loop's own executor: the virtual-clock loop holds time while its futures run.
        return await asyncio.get_running_loop().run_in_executor(None, self.decide, ctx)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources the guardrail owns (called once, when the process stops)."""


class ResponseGuardrailSpec(pydantic.BaseModel, extra="forbid", frozen=True):
    """One configured response guardrail (an entry of ``guardrails.response``).

    Attributes:
        name: Unique, non-empty name of the entry.
        type: A built-in type (``max_length``, ``blocked_phrases``, ``decision``) or
            ``"package.module:ClassName"`` naming an :class:`AgentResponseGuardrail`.
        report_only: Evaluate and report, never block.
        on_error: What no verdict means when enforcing: "allow" or "deny".
        timeout: Loop seconds the guardrail may take; a timeout is no verdict.
        replacement: Spoken instead of a denied reply when the guardrail gives none.
        config: Passed to the guardrail as :attr:`GuardrailContext.config`.
    """

    name: str = pydantic.Field(min_length=1)
    type: str = pydantic.Field(min_length=1)
    report_only: bool = False
    on_error: Literal["allow", "deny"] = "allow"
    timeout: float = pydantic.Field(default=2.0, gt=0, allow_inf_nan=False)
    replacement: str | None = None
    config: dict[str, Any] = pydantic.Field(default_factory=dict)


class ResponseGuardrailError(ValueError):
    """A response guardrail is misconfigured; the one-line message names the key."""


class GuardrailConfigError(ValueError):
    """Raised by a guardrail's constructor for a bad ``config`` value.

    :meth:`ResponseGuardrails.build` turns it into a :class:`ResponseGuardrailError`
    naming ``<key>[i].config.<key>``.

    Args:
        key: The key inside ``config`` (e.g. ``"max_chars"`` or ``"patterns[2]"``).
        expected: What was expected, e.g. ``"expected an integer > 0, got 'ten'"``.
    """

    def __init__(self, key: str, expected: str) -> None:
        super().__init__(f"config.{key}: {expected}")
        self.key = key
        self.expected = expected


@dataclass(frozen=True)
class ResponseVerdict:
    """What one guardrail concluded about one reply.

    Attributes:
        name: The entry's name.
        outcome: "allow", "deny" or "no_verdict".
        reason: Why (the decision's reason, or what failed).
        replacement: What to say instead if this verdict blocks.
        enforced: False for a report-only entry.
        latency: Loop seconds the guardrail took.
        error: For no verdict: the exception type, "timeout" or the Fail reason.
        on_error: The entry's ``on_error``.
    """

    name: str
    outcome: Literal["allow", "deny", "no_verdict"]
    reason: str
    replacement: str | None
    enforced: bool
    latency: float
    error: str | None = None
    on_error: Literal["allow", "deny"] = "allow"

    @property
    def blocks(self) -> bool:
        """Whether this verdict stops the reply."""
        if not self.enforced:
            return False
        return self.outcome == "deny" or (self.outcome == "no_verdict" and self.on_error == "deny")


@dataclass(frozen=True)
class _Entry:
    spec: ResponseGuardrailSpec
    guardrail: AgentResponseGuardrail


class ResponseGuardrails:
    """The response guardrails configured for a process, shared by every call.

    Build with :meth:`build`; each guardrail is instantiated once.
    """

    def __init__(self, entries: Sequence[_Entry], *, key: str = "guardrails.response") -> None:
        self._entries = tuple(entries)
        self._key = key

    @classmethod
    def build(
        cls,
        specs: Sequence[ResponseGuardrailSpec | Mapping[str, Any]],
        *,
        decision_model: DecisionModelFactory | None = None,
        key: str = "guardrails.response",
    ) -> ResponseGuardrails:
        """Validate the entries and instantiate each guardrail once.

        Args:
            specs: The entries, as specs or mappings (e.g. from YAML).
            decision_model: Builds a decision model from a model string, for the
                ``decision`` type and for guardrails that ask for one.
            key: The config key of the list, used in error messages.

        Returns:
            The guardrails, in configured order.

        Raises:
            ResponseGuardrailError: An entry is invalid, a type cannot be imported or is
                not an :class:`AgentResponseGuardrail`, or a constructor failed.
        """
        if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Sequence):
            raise ResponseGuardrailError(f"{key}: expected a list of guardrail entries")
        entries: list[_Entry] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(specs):
            where = f"{key}[{i}]"
            spec = _parse_spec(raw, where)
            if spec.name in seen:
                raise ResponseGuardrailError(
                    f"{where}.name: duplicate name {spec.name!r} "
                    f"(already used by {key}[{seen[spec.name]}])"
                )
            seen[spec.name] = i
            guardrail_cls = _resolve_type(spec.type, f"{where}.type")
            context = GuardrailContext(spec.name, dict(spec.config), decision_model)
            entries.append(_Entry(spec, _instantiate(guardrail_cls, context, spec, where)))
        return cls(entries, key=key)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        """The entries' names, in configured order."""
        return tuple(entry.spec.name for entry in self._entries)

    @property
    def specs(self) -> tuple[ResponseGuardrailSpec, ...]:
        """The validated entries, in configured order."""
        return tuple(entry.spec for entry in self._entries)

    def check_binding(self, *, streamed: bool) -> None:
        """Refuse enforcing guardrails on streamed replies (call at startup).

        Args:
            streamed: Whether the agent's replies are streamed out as generated.

        Raises:
            ResponseGuardrailError: For the first enforcing guardrail, when ``streamed``.
        """
        if not streamed:
            return
        for i, entry in enumerate(self._entries):
            if not entry.spec.report_only:
                raise ResponseGuardrailError(
                    f"{self._key}[{i}] ({entry.spec.name}): an enforcing response guardrail "
                    "cannot check a streamed reply; set report_only: true or reply_mode: buffered"
                )

    async def check(self, ctx: CallContext) -> list[ResponseVerdict]:
        """Run every guardrail on one reply, concurrently; never raises.

        Each guardrail is bounded by its ``timeout`` on the loop's clock. For a
        guardrail that implements :meth:`AgentResponseGuardrail.decide`, the timeout
        includes waiting for a free executor thread; a timed-out ``decide`` keeps its
        thread until it returns, and its result is discarded.

        Args:
            ctx: The reply and its call.

        Returns:
            One verdict per guardrail, in configured order.
        """
        if not self._entries:
            return []
        return list(await asyncio.gather(*(_run(entry, ctx) for entry in self._entries)))

    @staticmethod
    def combine(verdicts: Iterable[ResponseVerdict]) -> tuple[bool, str | None]:
        """Merge verdicts into what happens to the reply.

        Args:
            verdicts: The verdicts of :meth:`check`.

        Returns:
            ``(blocked, replacement)``: blocked when any verdict blocks; the replacement
            of the first blocking verdict (None when nothing blocks or it has none).
        """
        for verdict in verdicts:
            if verdict.blocks:
                return True, verdict.replacement
        return False, None

    async def aclose(self) -> None:
        """Close every guardrail; errors are logged, not raised."""
        for entry in self._entries:
            try:
                await entry.guardrail.aclose()
            except Exception as exc:
                logger.warning(
                    "closing response guardrail %s failed: %s",
                    entry.spec.name,
                    type(exc).__name__,
                )


async def _run(entry: _Entry, ctx: CallContext) -> ResponseVerdict:
    spec = entry.spec
    loop = asyncio.get_running_loop()
    started = loop.time()

    def verdict(
        outcome: Literal["allow", "deny", "no_verdict"],
        reason: str,
        replacement: str | None = None,
        error: str | None = None,
    ) -> ResponseVerdict:
        return ResponseVerdict(
            name=spec.name,
            outcome=outcome,
            reason=reason,
            replacement=replacement,
            enforced=not spec.report_only,
            latency=loop.time() - started,
            error=error,
            on_error=spec.on_error,
        )

    def failed(error: str) -> ResponseVerdict:
        logger.warning(
            "response guardrail %s reached no verdict: %s",
            spec.name,
            error,
            extra={"call_id": ctx.call_id, "guardrail": spec.name},
        )
        return verdict("no_verdict", f"no verdict: {error}", spec.replacement, error)

    timeout = asyncio.timeout(spec.timeout)
    try:
        async with timeout:
            decision: object = await entry.guardrail.decide_async(ctx)
    except TimeoutError:
        return failed("timeout" if timeout.expired() else "TimeoutError")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the check itself is being cancelled
        return failed("CancelledError")
    except Exception as exc:
        # The message may quote the reply, so only its type is reported.
        return failed(type(exc).__name__)

    match decision:
        case Allow():
            return verdict("allow", "allowed")
        case Deny(reason=reason, replacement=replacement):
            return verdict(
                "deny", reason, replacement if replacement is not None else spec.replacement
            )
        case Fail(reason=reason):
            return failed(reason)
    return failed(f"invalid decision {type(decision).__name__}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _parse_spec(raw: object, where: str) -> ResponseGuardrailSpec:
    if isinstance(raw, ResponseGuardrailSpec):
        return raw
    try:
        return ResponseGuardrailSpec.model_validate(raw)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
        raise ResponseGuardrailError(f"{where}{loc}: {_one_line(error['msg'])}") from None


def _resolve_type(name: str, where: str) -> type[AgentResponseGuardrail]:
    from guardrails.response_builtin import BUILTIN_TYPES

    if name in BUILTIN_TYPES:
        return BUILTIN_TYPES[name]
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise ResponseGuardrailError(
            f"{where}: unknown type {name!r} (expected one of "
            f"{', '.join(sorted(BUILTIN_TYPES))} or 'package.module:ClassName')"
        )
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise ResponseGuardrailError(
            f"{where}: cannot import {name!r} ({_one_line(str(exc))})"
        ) from None
    except AttributeError:
        raise ResponseGuardrailError(
            f"{where}: cannot import {name!r} (module {module_name!r} has no attribute {attr!r})"
        ) from None
    except Exception as exc:
        raise ResponseGuardrailError(
            f"{where}: cannot import {name!r} ({type(exc).__name__}: {_one_line(str(exc))})"
        ) from None
    if not (isinstance(obj, type) and issubclass(obj, AgentResponseGuardrail)):
        raise ResponseGuardrailError(
            f"{where}: {name!r} is not a subclass of AgentResponseGuardrail"
        )
    if inspect.isabstract(obj):
        raise ResponseGuardrailError(
            f"{where}: {name!r} is abstract (implement decide, or override decide_async and "
            "let decide raise NotImplementedError)"
        )
    return obj


def _instantiate(
    guardrail_cls: type[AgentResponseGuardrail],
    context: GuardrailContext,
    spec: ResponseGuardrailSpec,
    where: str,
) -> AgentResponseGuardrail:
    try:
        params = inspect.signature(guardrail_cls).parameters.values()
    except (TypeError, ValueError):
        params = inspect.Signature().parameters.values()
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) > 1:
        raise ResponseGuardrailError(
            f"{where}.type: {spec.type!r} must take no arguments or one GuardrailContext"
        )
    try:
        return guardrail_cls(context) if positional else guardrail_cls()  # type: ignore[call-arg]
    except GuardrailConfigError as exc:
        raise ResponseGuardrailError(
            f"{where}.config.{exc.key}: {_one_line(exc.expected)}"
        ) from None
    except ResponseGuardrailError:
        raise
    except Exception as exc:
        raise ResponseGuardrailError(
            f"{where} ({spec.name}): {spec.type!r} failed to start "
            f"({type(exc).__name__}: {_one_line(str(exc))})"
        ) from None
