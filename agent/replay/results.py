"""The result of replaying one recorded call, and its evaluation against ``expect``.

:class:`CallResult` serialises to exactly one JSON Lines record of RECORDED_CALLS.md
(keys in the documented order; callee turns carry no ``interrupted`` key).
:func:`evaluate` lists the ``expect`` keys a result does not meet.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from agent.telephony.sim.recorded_call import (
    GUARDRAIL_COUNTERS,
    AmdCategory,
    Disposition,
    GuardrailAction,
    GuardrailHook,
    RecordedCall,
)

__all__ = [
    "AmdResult",
    "CallResult",
    "Failure",
    "GuardrailEvaluation",
    "MODEL_FAILURE",
    "RUNTIME_FAILURE",
    "Turn",
    "TurnLatencyResult",
    "UNANSWERED_DISPOSITIONS",
    "collapse_stages",
    "evaluate",
    "judge",
]

AmdStage = AmdCategory | Literal["wait"]
UNANSWERED_DISPOSITIONS: frozenset[str] = frozenset({"busy", "no-answer", "rejected", "failed"})
"""Dispositions of calls that never connected: their result has ``"amd": null``."""

Time = float  # seconds after answer, on the replay clock

RUNTIME_FAILURE = "runtime.subscriber"
"""The ``failures`` key of a bus subscriber that missed messages (the result is partial)."""

MODEL_FAILURE = "runtime.model"
"""The ``failures`` key of a session model (STT, LLM, TTS) that failed beyond livekit's
retries: the call went on, or ended, without it."""


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class AmdResult(_Result):
    """What answering-machine detection concluded."""

    category: AmdCategory
    stages: list[AmdStage] = Field(default_factory=list)
    decided_at: Time | None = None
    reason: str = ""


class TurnLatencyResult(_Result):
    """How long the agent took to answer a callee turn, stage by stage.

    ``total`` runs from the end of the callee's audio (where the line knows it; else the
    VAD's end of speech, else the turn's commit) to the agent's first audio. ``stages``
    (seconds, in pipeline order) sum to ``total``: each stage is charged only with the
    time it added to the critical path. ``milestones`` are the times each step was
    reached, in seconds after the answer (``null`` where a step does not apply, e.g.
    ``vad_end`` in text-only replays). On a ``virtual`` clock models take no time, so
    only the configured waits (endpointing, playout) show.
    """

    clock: Literal["wall", "virtual"]
    total: float = Field(ge=0)
    stages: dict[str, float] = Field(default_factory=dict)
    milestones: dict[str, Time | None] = Field(default_factory=dict)
    preemptive: bool = False
    prompt_tokens: int | None = None
    cached_tokens: int | None = None


class Turn(_Result):
    """One spoken turn. ``interrupted`` is only meaningful (and serialised) for agent turns.

    A callee turn the agent answered carries ``latency``; other turns omit the key.
    """

    role: Literal["callee", "agent"]
    start: Time
    end: Time
    text: str
    interrupted: bool | None = None
    latency: TurnLatencyResult | None = None

    @model_validator(mode="before")
    @classmethod
    def _agent_turns_default_uninterrupted(cls, data: Any) -> Any:
        is_agent = isinstance(data, dict) and data.get("role") == "agent"
        if is_agent and data.get("interrupted") is None:
            return {**data, "interrupted": False}
        return data

    @model_validator(mode="after")
    def _check(self) -> Turn:
        if self.role == "callee" and self.interrupted is not None:
            raise ValueError("callee turns have no 'interrupted'")
        if self.role == "agent" and self.latency is not None:
            raise ValueError("only callee turns carry 'latency'")
        if self.end < self.start:
            raise ValueError(f"turn ends ({self.end}) before it starts ({self.start})")
        return self

    @model_serializer(mode="wrap")
    def _omit_interrupted_for_callee(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            if self.role == "callee":
                data.pop("interrupted", None)
            if data.get("latency") is None:
                data.pop("latency", None)
        return data


class GuardrailEvaluation(_Result):
    """One guardrail check: which hook, when, what it decided and how long it took."""

    hook: GuardrailHook
    at: Time
    action: GuardrailAction
    decisions: dict[str, float | str | bool] = Field(default_factory=dict)
    latency: float = Field(default=0.0, ge=0)


class Failure(_Result):
    """One unmet ``expect`` key, or (key ``runtime.subscriber``) a part of the runtime that
    lost messages, so the result is partial: what was expected and what happened."""

    key: str
    expected: Any
    actual: Any


class CallResult(_Result):
    """Everything observed while replaying one call: one JSON Lines record.

    ``ok`` is True exactly when ``failures`` is empty; use :func:`judge` to fill both.
    ``voice`` (the callee voice of an audio replay, when the run or the call named one)
    is left out of the record when None.
    """

    name: str
    voice: str | None = None
    ok: bool = True
    amd: AmdResult | None = None
    disposition: Disposition
    voicemail_left: bool = False
    dtmf_sent: str = ""
    duration: float = Field(ge=0)
    agent_first_audio_at: Time | None = None
    turns: list[Turn] = Field(default_factory=list)
    guardrail: list[GuardrailEvaluation] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> CallResult:
        if self.ok == bool(self.failures):
            raise ValueError("ok must be true exactly when there are no failures")
        if self.disposition in UNANSWERED_DISPOSITIONS and self.amd is not None:
            raise ValueError(f"a {self.disposition} call was never answered: amd must be null")
        return self

    @model_serializer(mode="wrap")
    def _omit_unnamed_voice(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("voice") is None:
            data.pop("voice", None)
        return data

    def to_json_line(self) -> str:
        """This result as one compact JSON line (no newline), floats rounded to 3 decimals."""
        data = _rounded(self.model_dump(mode="json"))
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _rounded(value: Any) -> Any:
    match value:
        case bool():
            return value
        case float():
            return round(value, 3)
        case dict():
            return {key: _rounded(item) for key, item in value.items()}
        case list() | tuple():
            return [_rounded(item) for item in value]
    return value


def collapse_stages(stages: Iterable[str]) -> list[str]:
    """AMD stages with ``wait`` dropped and consecutive duplicates collapsed."""
    out: list[str] = []
    for stage in stages:
        if stage != "wait" and (not out or out[-1] != stage):
            out.append(stage)
    return out


def evaluate(call: RecordedCall, observed: CallResult) -> list[Failure]:
    """Compare an observed result with the call's ``expect``.

    Args:
        call: The recorded call, whose ``expect`` keys are checked.
        observed: What the replay produced (its ``failures`` are ignored).

    Returns:
        One Failure per unmet key, in the order of the ``expect`` keys; empty when
        everything expected happened. Keys: ``amd`` (final category, None when the
        call has no AMD result), ``amd_stages`` (collapsed stage sequence),
        ``voicemail_left``, ``dtmf`` (digits sent, in order), ``disposition`` and
        ``guardrail.<counter>`` (number of guardrail entries with the counter's hook
        and action).
    """
    expect, amd = call.expect, observed.amd
    failures: list[Failure] = []

    def check(key: str, expected: Any, actual: Any) -> None:
        if expected is not None and expected != actual:
            failures.append(Failure(key=key, expected=expected, actual=actual))

    check("amd", expect.amd, amd.category if amd else None)
    if expect.amd_stages is not None:
        actual_stages = collapse_stages(amd.stages) if amd else None
        check("amd_stages", collapse_stages(expect.amd_stages), actual_stages)
    check("voicemail_left", expect.voicemail_left, observed.voicemail_left)
    check("dtmf", expect.dtmf, observed.dtmf_sent)
    check("disposition", expect.disposition, observed.disposition)
    if expect.guardrail is not None:
        for counter, wanted in expect.guardrail.counters().items():
            hook, action = GUARDRAIL_COUNTERS[counter]
            count = sum(1 for g in observed.guardrail if g.hook == hook and g.action == action)
            check(f"guardrail.{counter}", wanted, count)
    return failures


def judge(call: RecordedCall, observed: CallResult) -> CallResult:
    """``observed`` with ``failures`` and ``ok`` set from :func:`evaluate`.

    The runtime's failures already in ``observed`` are kept (first): a partial
    result is never ``ok``, whatever it matched.
    """
    kept = [f for f in observed.failures if f.key.startswith("runtime.")]
    failures = [*kept, *evaluate(call, observed)]
    return observed.model_copy(update={"failures": failures, "ok": not failures})
