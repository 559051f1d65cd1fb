"""The tool gate: three questions before a tool call runs, :class:`ToolGate`.

Before the agent runs a tool call that is not read-only and that its policy allows,
the gate asks a decision model whether the call is ``destructive``, carries data
out of the call (``exfiltration``) or goes ``beyond_requested_scope``. In mode
``"on"`` any answer at or above :data:`ACT_AT` turns the Allow into an Ask (the
agent confirms with the caller first); an Ask or a Deny is never asked about, so
the gate can never turn either into an Allow. In mode ``"shadow"`` it only logs
what it would have done; in mode ``"off"`` it asks nothing.

The model is an oracle (say an LLM) bounded by a timeout, with
:class:`~guardrails.tool_heuristics.HeuristicToolModel` answering what the oracle
does not (:func:`~guardrails.guarded.guarded`), or the heuristic alone. Log events
are structured dicts with the tool name, the answers and the decision; argument
values and transcripts never go in them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from .guarded import guarded
from .tool_heuristics import (
    ARGUMENTS,
    CALL_HEADER,
    CALLER_HEADER,
    DESCRIPTION,
    GOAL,
    NONE,
    Q_BEYOND_SCOPE,
    Q_DESTRUCTIVE,
    Q_EXFILTRATION,
    QUESTIONS,
    RECENT,
    TOOL,
    HeuristicToolModel,
)

__all__ = [
    "ACT_AT",
    "QUESTIONS",
    "Q_BEYOND_SCOPE",
    "Q_DESTRUCTIVE",
    "Q_EXFILTRATION",
    "Decision",
    "GateAdvice",
    "GateMode",
    "HeuristicToolModel",
    "ToolCallInfo",
    "ToolGate",
    "gate_decisions",
    "tool_input",
]

logger = logging.getLogger(__name__)

ACT_AT = 0.70
"""An answer at or above this turns an Allow into an Ask (in mode ``"on"``)."""

Decision = Literal["allow", "ask", "deny"]
GateMode = Literal["off", "shadow", "on"]

# Time the fallback may take on top of the oracle's timeout: the heuristic is instant,
# this only keeps the outer deadline from racing it.
_FALLBACK_GRACE = 1.0


@dataclass(frozen=True)
class ToolCallInfo:
    """A pending tool call.

    Attributes:
        name: The tool's name.
        arguments: The call's arguments.
        read_only: The tool only reads: the gate never asks about it.
        description: The tool's description, as the agent's LLM saw it.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    read_only: bool = False
    description: str = ""


@dataclass(frozen=True)
class GateAdvice:
    """What the gate advises for one call.

    Attributes:
        decision: What the caller of the gate must do now.
        proposed: What the policy proposed.
        would: What mode ``"on"`` would decide (equals ``decision`` in mode on).
        values: Question -> answer in [0, 1]; empty when nothing was asked.
        flagged: The questions answered at or above :data:`ACT_AT`, in question order.
        source: ``"oracle"`` (every answer from the model), ``"heuristic"`` (every
            answer from the heuristic), ``"mixed"``, ``"skipped"`` (not asked:
            read-only, mode off, or proposed not allow) or ``"error"``.
        mode: The gate's mode.
    """

    decision: Decision
    proposed: Decision
    would: Decision
    values: Mapping[str, float]
    flagged: tuple[str, ...]
    source: str
    mode: str


def gate_decisions() -> dict[str, llm.Probability]:
    """The gate's three questions, keyed by name, for a decision model.

    Returns:
        A new dict of :data:`Q_DESTRUCTIVE`, :data:`Q_EXFILTRATION` and
        :data:`Q_BEYOND_SCOPE` to probability decisions about the input of
        :func:`tool_input`.
    """
    return {
        Q_DESTRUCTIVE: llm.Probability(
            "Running the pending tool call would delete, cancel, wipe, reset or overwrite "
            "something, close an account, refund or move money, or act on many records at "
            "once (all, every), in a way that is hard to undo."
        ),
        Q_EXFILTRATION: llm.Probability(
            "The pending tool call would send data outside this phone call: to an email "
            "address, phone number, URL or other third party (send, forward, export, share, "
            "upload), or it carries personal data in bulk, card numbers or ID numbers."
        ),
        Q_BEYOND_SCOPE: llm.Probability(
            "The pending tool call does something the caller did not ask for: its action, "
            "its item or how many items it touches is not supported by the caller's goal and "
            "the caller's own words in the recent turns."
        ),
    }


def _line(text: str) -> str:
    return " ".join(text.split())


def tool_input(call: ToolCallInfo, goal: str, recent: Sequence[tuple[str, str]] = ()) -> str:
    """The text a decision model evaluates: the caller's request, then the pending call.

    Every value goes on its own prefixed line (``Goal:``, ``user:``, ``Tool:``), newlines
    in it flattened, so nothing a caller says can pass for the tool call.

    Args:
        call: The pending call; its arguments are written as JSON (anything JSON cannot
            encode, as text).
        goal: What the caller asked for ("" when unknown).
        recent: Recent ``(role, text)`` turns, oldest first (roles ``user`` and
            ``assistant``).

    Returns:
        The input text.
    """
    turns = [f"{_line(role).replace(':', '') or 'unknown'}: {_line(text)}" for role, text in recent]
    args = json.dumps(dict(call.arguments), default=str, ensure_ascii=False, sort_keys=True)
    return "\n".join(
        [
            CALLER_HEADER,
            f"{GOAL} {_line(goal) or NONE}",
            RECENT if turns else f"{RECENT} {NONE}",
            *turns,
            "",
            CALL_HEADER,
            f"{TOOL} {_line(call.name)}",
            f"{DESCRIPTION} {_line(call.description) or NONE}",
            f"{ARGUMENTS} {args}",
        ]
    )


def _source(results: Mapping[str, llm.DecisionResult]) -> str:
    by = {r.provider_data.get("answered_by", "fallback") for r in results.values()}
    if by == {"primary"}:
        return "oracle"
    return "heuristic" if by == {"fallback"} else "mixed"


class ToolGate:
    """Advises Allow or Ask for pending tool calls (see the module docstring).

    One gate can serve every call of a process; :meth:`advise` keeps no state.
    """

    def __init__(
        self,
        *,
        mode: GateMode,
        model: llm.DecisionModel | None = None,
        timeout: float = 2.5,
        log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Make a gate.

        Args:
            mode: ``"off"`` (ask nothing), ``"shadow"`` (ask and log, change nothing) or
                ``"on"`` (an answer at or above :data:`ACT_AT` turns Allow into Ask).
            model: The oracle, shared, not owned; None: the heuristic alone.
            timeout: Seconds the oracle may take before the heuristic answers instead.
            log: Receives one structured dict per asked call (``event`` is
                ``"tool_gate"``, ``"tool_gate_shadow"`` or ``"tool_gate_error"``); None:
                the module logger at INFO, the dict's fields as ``extra``.

        Raises:
            ValueError: ``mode`` is not off, shadow or on, or ``timeout`` is not positive.
        """
        if mode not in get_args(GateMode):
            raise ValueError(f"tool gate mode: expected off, shadow or on, got {mode!r}")
        if timeout <= 0:
            raise ValueError(f"tool gate timeout: expected seconds > 0, got {timeout!r}")
        self._mode: GateMode = mode
        heuristic = HeuristicToolModel()
        self._model = heuristic if model is None else guarded(model, heuristic, timeout)
        self._conn = APIConnectOptions(max_retry=0, timeout=timeout + _FALLBACK_GRACE)
        self._log = log

    @property
    def mode(self) -> GateMode:
        """``"off"``, ``"shadow"`` or ``"on"``."""
        return self._mode

    @property
    def model(self) -> llm.DecisionModel:
        """The model asked: the guarded oracle, or the heuristic alone."""
        return self._model

    async def advise(
        self,
        call: ToolCallInfo,
        proposed: Decision,
        *,
        goal: str,
        recent: Sequence[tuple[str, str]] = (),
    ) -> GateAdvice:
        """Advise on one pending call. Never raises (cancellation aside).

        Args:
            call: The pending call.
            proposed: What the policy proposed; only ``"allow"`` is ever asked about.
            goal: What the caller asked for, read afresh per call.
            recent: Recent ``(role, text)`` turns, oldest first.

        Returns:
            The advice. If neither the oracle nor the heuristic answers every question,
            the decision is ``"ask"`` in mode on (fail closed), ``proposed`` in shadow,
            with source ``"error"``.
        """
        if self._mode == "off" or call.read_only or proposed != "allow":
            return GateAdvice(proposed, proposed, proposed, {}, (), "skipped", self._mode)
        try:
            response = await self._model.evaluate(
                input=tool_input(call, goal, recent),
                decisions=gate_decisions(),
                conn_options=self._conn,
            )
        except Exception as exc:
            return self._failed(call, proposed, {}, type(exc).__name__)
        results = response.results
        values = {
            q: r.value for q in QUESTIONS if isinstance(r := results.get(q), llm.ProbabilityResult)
        }
        if missing := [q for q in QUESTIONS if q not in values]:
            return self._failed(call, proposed, values, f"unanswered: {', '.join(missing)}")
        flagged = tuple(q for q in QUESTIONS if values[q] >= ACT_AT)
        would: Decision = "ask" if flagged else "allow"
        advice = GateAdvice(
            decision=would if self._mode == "on" else proposed,
            proposed=proposed,
            would=would,
            values=values,
            flagged=flagged,
            source=_source(results),
            mode=self._mode,
        )
        self._emit(
            "tool_gate" if self._mode == "on" else "tool_gate_shadow",
            call,
            advice,
            source=advice.source,
        )
        return advice

    def _failed(
        self, call: ToolCallInfo, proposed: Decision, values: dict[str, float], error: str
    ) -> GateAdvice:
        advice = GateAdvice(
            decision="ask" if self._mode == "on" else proposed,
            proposed=proposed,
            would="ask",
            values=values,
            flagged=tuple(q for q in QUESTIONS if values.get(q, 0.0) >= ACT_AT),
            source="error",
            mode=self._mode,
        )
        self._emit("tool_gate_error", call, advice, error=error)
        return advice

    def _emit(self, event: str, call: ToolCallInfo, advice: GateAdvice, **more: str) -> None:
        record: dict[str, Any] = {
            "event": event,
            "tool": call.name,
            "mode": self._mode,
            "decision": advice.decision,
            "would": advice.would,
            "flagged": list(advice.flagged),
            "values": dict(advice.values),
            **more,
        }
        if self._log is None:
            logger.info(event, extra={k: v for k, v in record.items() if k != "event"})
            return
        try:
            self._log(record)
        except Exception:
            # a broken log sink must not block or allow a tool call; report it instead
            logger.exception("tool gate log callback failed", extra={"tool": call.name})
