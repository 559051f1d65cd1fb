"""CallObserver: listens to every message on a call's bus and builds the call's result.

It is the call recorder the replay JSON comes from: turns (callee and agent,
with times after the answer), AMD predictions, guardrail evaluations, DTMF and
the disposition. It also measures response latency: end of callee speech to
the first agent audio of the reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.core import ALL, Bus
from agent.core.messages import (
    LATENCY_MILESTONES,
    AgentSpeechStarted,
    AgentTurnCompleted,
    AmdCompleted,
    AmdPrediction,
    CallAnswered,
    CallEnded,
    DtmfSent,
    GuardrailEvaluated,
    ModelFailed,
    TurnLatency,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
    VoicemailLeft,
)
from agent.replay.results import (
    MODEL_FAILURE,
    RUNTIME_FAILURE,
    AmdResult,
    CallResult,
    Failure,
    GuardrailEvaluation,
    Turn,
    TurnLatencyResult,
    collapse_stages,
)

__all__ = ["answered_lines", "CallObserver"]


@dataclass
class _AgentRun:
    start: float | None = None
    end: float | None = None
    text: str = ""
    interrupted: bool = False
    done: bool = False


@dataclass
class CallObserver:
    """Collects a call's events (subscribe it with :meth:`attach`)."""

    messages: list[Any] = field(default_factory=list)
    answered_at: float | None = None
    ended: CallEnded | None = None
    _speech_start: float | None = None
    _speech_stop: float | None = None
    _callee_turns: list[tuple[float, float, str, str]] = field(default_factory=list)
    #: each answered callee turn's latency breakdown, by turn id
    turn_latency: dict[str, TurnLatency] = field(default_factory=dict)
    _runs: dict[str, _AgentRun] = field(default_factory=dict)
    _run_order: list[str] = field(default_factory=list)
    _amd: list[AmdPrediction] = field(default_factory=list)
    _amd_done: AmdCompleted | None = None
    voicemail_left: bool = False
    _guardrail: list[GuardrailEvaluated] = field(default_factory=list)
    dtmf_sent: str = ""
    latencies: list[float] = field(default_factory=list)
    _awaiting_reply_since: float | None = None
    _model_failures: list[ModelFailed] = field(default_factory=list)
    _bus: Bus | None = None

    def attach(self, bus: Bus) -> None:
        """Subscribe to every message; the bus's subscriber failures go into the result."""
        self._bus = bus
        bus.subscribe(ALL, self.on_message)

    def runtime_failures(self) -> list[Failure]:
        """One failure per bus subscriber that missed messages (this observer included),
        and one per model failure the session reported (:class:`ModelFailed`)."""
        lost = [
            Failure(key=RUNTIME_FAILURE, expected="every message handled", actual=f.describe())
            for f in (self._bus.failures if self._bus is not None else [])
        ]
        return lost + [
            Failure(key=MODEL_FAILURE, expected="no model failure", actual=f"{m.model}: {m.error}")
            for m in self._model_failures
        ]

    def _run(self, run_id: str) -> _AgentRun:
        if run_id not in self._runs:
            self._runs[run_id] = _AgentRun()
            self._run_order.append(run_id)
        return self._runs[run_id]

    def on_message(self, msg: Any) -> None:
        self.messages.append(msg)
        match msg:
            case CallAnswered(at=at):
                self.answered_at = at
            case UserSpeechStarted(at=at):
                if self._speech_start is None:
                    self._speech_start = at
                self._awaiting_reply_since = None
            case UserSpeechStopped(at=at):
                self._speech_stop = at
                self._awaiting_reply_since = at
            case UserTurnCompleted(at=at, text=text, turn_id=turn_id):
                start = self._speech_start if self._speech_start is not None else at
                end = self._speech_stop if self._speech_stop is not None else at
                self._callee_turns.append((start, max(start, end), text, turn_id))
                self._speech_start = self._speech_stop = None
            case AgentSpeechStarted(at=at, run_id=run_id):
                run = self._run(run_id)
                if run.start is None:
                    run.start = at
                if self._awaiting_reply_since is not None:
                    self.latencies.append(at - self._awaiting_reply_since)
                    self._awaiting_reply_since = None
            case AgentTurnCompleted(at=at, run_id=run_id, text=text, interrupted=interrupted):
                run = self._run(run_id)
                run.end, run.text, run.interrupted, run.done = at, text, interrupted, True
            case AmdPrediction():
                self._amd.append(msg)
            case AmdCompleted():
                if self._amd_done is None:
                    self._amd_done = msg
            case TurnLatency(turn_id=turn_id):
                self.turn_latency.setdefault(turn_id, msg)
            case VoicemailLeft():
                self.voicemail_left = True
            case GuardrailEvaluated():
                self._guardrail.append(msg)
            case DtmfSent(digits=digits):
                self.dtmf_sent += digits
            case ModelFailed():
                self._model_failures.append(msg)
            case CallEnded():
                self.ended = msg

    def _rel(self, t: float) -> float:
        base = self.answered_at if self.answered_at is not None else t
        return max(0.0, t - base)

    def result(self, name: str) -> CallResult:
        """The observed result: ``failures`` holds what the runtime lost (``judge`` adds the
        unmet ``expect`` keys), and a result with failures is not ``ok``."""
        assert self.ended is not None, "the call has not ended"
        answered = self.answered_at is not None
        turns: list[tuple[float, Turn]] = []
        for start, end, text, turn_id in self._callee_turns:
            latency = self.turn_latency.get(turn_id)
            turns.append(
                (
                    start,
                    Turn(
                        role="callee",
                        start=self._rel(start),
                        end=self._rel(end),
                        text=text,
                        latency=self._latency(latency) if latency is not None else None,
                    ),
                )
            )
        first_audio: float | None = None
        for run_id in self._run_order:
            run = self._runs[run_id]
            if run.start is None:
                continue  # a reply that never made a sound is not a turn
            # a reply still playing when the line dropped ends with the call
            end = min(run.end if run.end is not None else self.ended.at, self.ended.at)
            first_audio = run.start if first_audio is None else min(first_audio, run.start)
            turns.append(
                (
                    run.start,
                    Turn(
                        role="agent",
                        start=self._rel(run.start),
                        end=self._rel(max(end, run.start)),
                        text=run.text,
                        interrupted=run.interrupted,
                    ),
                )
            )
        turns.sort(key=lambda item: item[0])
        amd = self._amd_result() if answered else None
        lost = self.runtime_failures()
        return CallResult(
            name=name,
            ok=not lost,
            failures=lost,
            amd=amd,
            disposition=self.ended.disposition,
            voicemail_left=self.voicemail_left,
            dtmf_sent=self.dtmf_sent,
            duration=self._rel(self.ended.at) if answered else 0.0,
            agent_first_audio_at=self._rel(first_audio) if first_audio is not None else None,
            turns=[t for _, t in turns],
            guardrail=[
                GuardrailEvaluation(
                    hook=g.hook,
                    at=self._rel(g.at),
                    action=g.action,
                    decisions=g.decisions,
                    latency=g.latency,
                )
                for g in self._guardrail
            ],
        )

    def _latency(self, msg: TurnLatency) -> TurnLatencyResult:
        milestones: dict[str, float | None] = {}
        for name in LATENCY_MILESTONES:
            value = getattr(msg, name)
            milestones[name] = None if value is None else self._rel_signed(value)
        return TurnLatencyResult(
            clock=msg.clock,
            total=msg.total(),
            stages=msg.stages(),
            milestones=milestones,
            preemptive=msg.preemptive,
            prompt_tokens=msg.prompt_tokens,
            cached_tokens=msg.cached_tokens,
        )

    def _rel_signed(self, t: float) -> float:
        # a milestone is never before the answer, but keep the sign honest if it were
        return t - self.answered_at if self.answered_at is not None else t

    def _amd_result(self) -> AmdResult:
        """AMD's completion when it came; otherwise what its predictions add up to."""
        done = self._amd_done
        if done is not None:
            return AmdResult.model_validate(
                {
                    "category": done.category,
                    "stages": list(done.stages),
                    "decided_at": self._rel(done.decided_at)
                    if done.decided_at is not None
                    else None,
                    "reason": done.reason,
                }
            )
        # the call ended before AMD reported completion: replay its stage changes
        stages: list[str] = []
        decided: float | None = None
        reason = "no-decision"
        pending_human: AmdPrediction | None = None
        for p in self._amd:
            if p.provisional:
                pending_human = p
                continue
            if pending_human is not None and p.changed:
                pending_human = None  # corrected
            if p.changed and (not stages or stages[-1] != p.stage) and p.stage != "uncertain":
                stages.append(p.stage)
                decided, reason = p.at, p.reason
        if pending_human is not None:
            stages.append("human")
            decided, reason = pending_human.at, pending_human.reason
        return AmdResult.model_validate(
            {
                "category": stages[-1] if stages else "uncertain",
                "stages": collapse_stages(stages),
                "decided_at": self._rel(decided) if decided is not None else None,
                "reason": reason,
            }
        )


def answered_lines(
    played: Sequence[tuple[str, float, float]], speech_starts: Sequence[float]
) -> list[tuple[float, float]]:
    """(end of a callee line's audio, the agent's next first audio) for each line answered.

    A line counts only if the agent started speaking before the callee's next
    line began (otherwise the agent did not answer that line). ``played`` and
    ``speech_starts`` must share one time base.
    """
    starts = sorted(speech_starts)
    lines = [(start, end) for payload, start, end in played if payload in ("say", "audio")]
    out = []
    for i, (_, end) in enumerate(lines):
        next_line = lines[i + 1][0] if i + 1 < len(lines) else float("inf")
        reply = next((t for t in starts if t > end), None)
        if reply is not None and reply < next_line:
            out.append((end, reply))
    return out
