"""Agent tools with declared side effects, and the per-call policy that guards them.

A tool is a Python function named in the agent config (``tools:``) with
``side_effects`` (default true: a tool must say it only reads) and ``confirm``
(it always needs a yes first). Every call of a tool goes through
:class:`ToolPolicy.review` before it runs:

1. Read-only tools run.
2. Strict side effects: on a voice call from an unverified caller every side
   effect needs a confirmation, and such a confirmation is denied at once (it is
   never left waiting for a timeout). The LLM is told the action is not
   available on this call.
3. Otherwise the policy proposes ``ask`` for ``confirm`` tools and ``allow`` for
   the rest, and the tool gate (:mod:`guardrails.toolgate`) may turn that allow
   into an ask. Nothing turns an ask into an allow.
4. An ask is settled by a verified caller saying yes aloud (the LLM is told to
   ask; the same call with the same arguments after a "yes" runs), or, on a
   channel that is not strict, by the guardian through the desk. Without either,
   it is denied.

Each review is a :class:`~agent.core.messages.ToolCallReviewed` on the bus.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from livekit.agents import RunContext, function_tool
from livekit.agents.llm import FunctionTool, RawFunctionTool
from pydantic import BaseModel, ConfigDict, Field

from agent.core.messages import Channel, ChannelContext, ToolCallReviewed

__all__ = [
    "ToolSpec",
    "DeclaredTool",
    "CallTrust",
    "ToolPolicy",
    "Review",
    "ToolLoadError",
    "load_tools",
    "is_affirmative",
]

Decision = Literal["allow", "ask", "deny"]


class ToolLoadError(ValueError):
    """A tool in the config cannot be imported or used (one line, names the key)."""


class ToolSpec(BaseModel):
    """One tool in the agent config."""

    model_config = ConfigDict(extra="forbid")
    #: ``package.module:function`` (a plain function or a livekit ``function_tool``).
    function: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    side_effects: bool = True
    confirm: bool = False


@dataclass(frozen=True)
class DeclaredTool:
    name: str
    description: str
    side_effects: bool
    confirm: bool
    func: Callable[..., Any]


def load_tools(specs: list[ToolSpec], *, source: str) -> list[DeclaredTool]:
    """Import the configured tools; a bad entry raises :class:`ToolLoadError`."""
    out: list[DeclaredTool] = []
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        key = f"{source}: tools[{i}].function"
        mod_name, _, attr = spec.function.partition(":")
        try:
            obj = getattr(importlib.import_module(mod_name), attr)
        except ImportError as exc:
            raise ToolLoadError(f"{key}: cannot import {mod_name!r} ({exc})") from None
        except AttributeError:
            raise ToolLoadError(f"{key}: {mod_name!r} has no {attr!r}") from None
        if isinstance(obj, FunctionTool | RawFunctionTool):
            if isinstance(obj, RawFunctionTool):
                raise ToolLoadError(f"{key}: raw-schema tools are not supported")
            name, description, func = obj.info.name, obj.info.description or "", obj._func
        elif inspect.iscoroutinefunction(obj) or inspect.isfunction(obj):
            name, description, func = obj.__name__, inspect.getdoc(obj) or "", obj
        else:
            raise ToolLoadError(f"{key}: expected a function, got {type(obj).__name__}")
        if not description.strip():
            raise ToolLoadError(f"{key}: the function needs a docstring (the LLM reads it)")
        if name in seen or name in ("end_call", "send_dtmf"):
            raise ToolLoadError(f"{key}: a tool named {name!r} already exists")
        seen.add(name)
        out.append(DeclaredTool(name, description, spec.side_effects, spec.confirm, func))
    return out


_YES = re.compile(
    r"\b(yes|yeah|yep|yup|sure|ok(ay)?|go ahead|please do|do it|confirm(ed)?|"
    r"correct|that'?s right|absolutely|definitely|affirmative)\b"
)
_NO = re.compile(r"\b(no|nope|nah|don'?t|do not|not|never|wait|stop|hold on|cancel that|wrong)\b")


def is_affirmative(text: str) -> bool:
    """Whether a caller's turn clearly says yes (and does not also say no)."""
    t = text.lower()
    return bool(_YES.search(t)) and not _NO.search(t)


class CallTrust:
    """Who is on the line: the channel, the caller's number, and verification."""

    def __init__(
        self, *, channel: Channel, caller_number: str | None, verifier: Any | None = None
    ) -> None:
        self.channel = channel
        self.caller_number = caller_number
        self.verifier = verifier

    @property
    def verified(self) -> bool:
        return self.verifier is not None and self.verifier.state == "verified"

    @property
    def strict(self) -> bool:
        """Strict side effects: a voice caller who has not verified."""
        return self.channel == "voice" and not self.verified

    def context(self) -> ChannelContext:
        return ChannelContext(
            channel=self.channel, caller_number=self.caller_number, verified=self.verified
        )

    def prompt_note(self) -> str:
        """This turn's channel context, as the LLM reads it."""
        who = "verified as the account holder" if self.verified else "not verified"
        return (
            f"Channel: {'phone call' if self.channel == 'voice' else 'text chat'}. "
            f"The caller is {who}."
        )


@dataclass(frozen=True)
class Review:
    decision: Decision
    reason: str
    message: str | None = None


def _key(name: str, args: dict[str, Any]) -> str:
    return name + ":" + json.dumps(args, sort_keys=True, default=str)


class ToolPolicy:
    """One call's tool policy: trust, the tool gate and confirmations."""

    def __init__(
        self,
        *,
        call_id: str,
        trust: CallTrust,
        publish: Callable[[Any], None],
        gate: Any | None = None,
        desk: Any | None = None,
        question_timeout: float = 60.0,
        goal: str = "",
    ) -> None:
        self.call_id = call_id
        self.trust = trust
        self.gate = gate
        self.desk = desk
        self.question_timeout = question_timeout
        self.goal = goal
        self._publish = publish
        #: called with ("tool", summary) after a tool ran (the watchdog reads it)
        self.observe: Callable[[str, str], None] = lambda role, text: None
        self._recent: list[tuple[str, str]] = []
        self._awaiting: set[str] = set()
        self._approved: set[str] = set()
        self.run_id: Callable[[], str | None] = lambda: None

    # -- what was said ---------------------------------------------------------

    def caller_turn(self, text: str) -> None:
        """A caller turn: it confirms (or not) the actions the agent asked about."""
        self._recent = [*self._recent, ("caller", text)][-4:]
        if self._awaiting:
            if is_affirmative(text):
                self._approved |= self._awaiting
            self._awaiting = set()

    def agent_turn(self, text: str) -> None:
        self._recent = [*self._recent, ("agent", text)][-4:]

    # -- reviews ---------------------------------------------------------------

    async def review(self, tool: DeclaredTool, args: dict[str, Any]) -> Review:
        """Decide whether ``tool`` may run now with ``args``; publishes the review."""
        proposed, would, values, mode = "allow", "allow", {}, "off"
        if not tool.side_effects:
            review = Review("allow", "read_only")
        elif self.trust.strict:
            proposed = would = "ask"
            review = Review(
                "deny",
                "unverified_caller",
                f"Not done: {tool.name} changes things, and this caller is not verified. "
                "Tell the caller you cannot do that on this call.",
            )
        else:
            proposed = "ask" if tool.confirm else "allow"
            decision: Decision = proposed  # type: ignore[assignment]
            if self.gate is not None:
                advice = await self._advise(tool, args, proposed)
                decision, would, values, mode = (
                    advice.decision,
                    advice.would,
                    dict(advice.values),
                    advice.mode,
                )
            else:
                would = proposed
            review = (
                Review("allow", "allowed") if decision == "allow" else await self._ask(tool, args)
            )
        self._publish(
            ToolCallReviewed(
                call_id=self.call_id,
                at=asyncio.get_running_loop().time(),
                tool=tool.name,
                decision=review.decision,
                proposed=proposed,  # type: ignore[arg-type]
                would=would,  # type: ignore[arg-type]
                reason=review.reason,
                gate_mode=mode,
                values=values,
                run_id=self.run_id(),
            )
        )
        return review

    async def _advise(self, tool: DeclaredTool, args: dict[str, Any], proposed: str) -> Any:
        from guardrails.toolgate import ToolCallInfo

        call = ToolCallInfo(
            name=tool.name,
            arguments=args,
            read_only=not tool.side_effects,
            description=tool.description,
        )
        assert self.gate is not None
        return await self.gate.advise(call, proposed, goal=self.goal, recent=self._recent)

    async def _ask(self, tool: DeclaredTool, args: dict[str, Any]) -> Review:
        key = _key(tool.name, args)
        if key in self._approved:
            self._approved.discard(key)
            return Review("allow", "confirmed")
        if self.trust.verified:
            self._awaiting.add(key)
            return Review(
                "ask",
                "confirm_aloud",
                f"Not done yet: {tool.name} needs the caller's confirmation. Ask the caller "
                "to confirm in one short question. If they say yes, call the tool again "
                "with the same arguments.",
            )
        if self.desk is not None:
            summary = json.dumps(args, sort_keys=True, default=str)
            q = self.desk.ask(self.call_id, f"May I run {tool.name} with {summary}? (yes/no)")
            answer = await self.desk.wait(q.id, self.question_timeout)
            if answer is not None and is_affirmative(answer):
                return Review("allow", "guardian_approved")
            return Review(
                "deny",
                "guardian_declined" if answer is not None else "guardian_timeout",
                f"Not done: the account holder did not approve {tool.name}.",
            )
        return Review(
            "deny",
            "no_confirmer",
            f"Not done: {tool.name} needs a confirmation that nobody on this call can give.",
        )

    # -- wrapping ---------------------------------------------------------------

    def wrap(self, tool: DeclaredTool) -> FunctionTool[Any, Any]:
        """The livekit tool for this call: reviewed, then run (sync or async)."""
        func = tool.func
        signature = inspect.signature(func)

        @functools.wraps(func)
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            # livekit passes the LLM's arguments positionally: bind them to their names
            try:
                bound = signature.bind_partial(*args, **kwargs).arguments
            except TypeError:
                bound = dict(kwargs)
            call_args = {k: v for k, v in bound.items() if not isinstance(v, RunContext)}
            review = await self.review(tool, call_args)
            if review.decision != "allow":
                return review.message
            result = func(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            self.observe("tool", f"{tool.name} succeeded: {str(result)[:200]}")
            return result

        return function_tool(guarded, name=tool.name, description=tool.description)
