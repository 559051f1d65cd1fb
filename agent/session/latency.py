"""LatencyRecorder: the milestones of every reply, published as one TurnLatency per turn.

The session and its agent mark milestones as they happen, on the call's clock:
the callee side (VAD end of speech, final transcript, turn committed) belongs to
the turn being listened to; the reply side (LLM request, first token, first
sentence released, TTS first audio, first audio played) belongs to a run (one
livekit speech handle). A run is bound to the turn it answers, which may happen
after its LLM work began (preemptive generation). A run nobody bound (a reply the
controller started, such as the greeting after AMD heard a person) answers the
latest turn not yet answered whose speech began before the run's first audio.
When an answered run that made a sound is over, one :class:`TurnLatency` goes on
the bus.

No asyncio, no I/O: the caller passes every time in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.core.messages import LatencyClock, TurnLatency

__all__ = ["LatencyRecorder"]


@dataclass
class _Listening:
    """Callee-side milestones of the turn not yet committed."""

    started: float | None = None
    vad_end: float | None = None
    stt_final: float | None = None


@dataclass
class _Turn:
    turn_id: str
    committed: float
    started: float | None
    vad_end: float | None
    stt_final: float | None


@dataclass
class _Run:
    marks: dict[str, float] = field(default_factory=dict)
    turn: _Turn | None = None
    preemptive: bool = False
    prompt_tokens: int | None = None
    cached_tokens: int | None = None


class LatencyRecorder:
    """Collects milestones per turn and per run; publishes one TurnLatency per answered turn.

    Args:
        call_id: the call's id.
        publish: puts a message on the call's bus.
        clock: "virtual" when the call runs on a virtual clock.
        audio_end: the line's ground truth, if it has one: the end of the callee's
            last speech that finished by the given time (``None`` when unknown).
    """

    def __init__(
        self,
        *,
        call_id: str,
        publish: Callable[[Any], None],
        clock: LatencyClock = "wall",
        audio_end: Callable[[float], float | None] | None = None,
    ) -> None:
        self._call_id = call_id
        self._publish = publish
        self._clock = clock
        self._audio_end = audio_end
        self._listening = _Listening()
        self._turns: dict[str, _Turn] = {}
        self._runs: dict[str, _Run] = {}

    # -- the callee's side -----------------------------------------------------

    def speech_started(self, at: float) -> None:
        """The callee started speaking (the first start of the turn counts)."""
        if self._listening.started is None:
            self._listening.started = at

    def vad_end(self, at: float) -> None:
        """The VAD ended a speech segment (the latest one before the commit counts)."""
        self._listening.vad_end = at

    def stt_final(self, at: float) -> None:
        """A final transcript arrived (the latest one before the commit counts)."""
        self._listening.stt_final = at

    def committed(self, turn_id: str, at: float) -> None:
        """The callee's turn was committed: what was heard so far belongs to it."""
        heard = self._listening
        self._turns[turn_id] = _Turn(turn_id, at, heard.started, heard.vad_end, heard.stt_final)
        self._listening = _Listening()

    # -- the reply's side ------------------------------------------------------

    def bind(self, run_id: str, turn_id: str, *, preemptive: bool = False) -> None:
        """``run_id`` answers ``turn_id`` (a preemptive run is bound after its work began)."""
        turn = self._turns.get(turn_id)
        if turn is None:
            return
        run = self._runs.setdefault(run_id, _Run())
        run.turn, run.preemptive = turn, preemptive

    def mark(self, run_id: str, milestone: str, at: float) -> None:
        """``milestone`` of ``run_id`` happened at ``at`` (the first time counts)."""
        self._runs.setdefault(run_id, _Run()).marks.setdefault(milestone, at)

    def tokens(self, run_id: str, prompt: int, cached: int) -> None:
        """Prompt tokens of the run's first LLM request and how many were cached."""
        run = self._runs.setdefault(run_id, _Run())
        if run.prompt_tokens is None:
            run.prompt_tokens, run.cached_tokens = prompt, cached

    def discard(self, run_id: str) -> None:
        """Forget a run that was never spoken (e.g. a discarded preemptive generation)."""
        self._runs.pop(run_id, None)

    def finish(self, run_id: str) -> TurnLatency | None:
        """The run is over: publish (once) and return its turn's latency, if it answered one."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return None
        if run.turn is None:
            run.turn = self._unanswered_before(run.marks.get("first_audio"))
        return self._emit(run_id, run)

    def _unanswered_before(self, first_audio: float | None) -> _Turn | None:
        if first_audio is None or not self._turns:
            return None
        latest = max(self._turns.values(), key=lambda t: t.committed)
        began = latest.started if latest.started is not None else latest.committed
        return latest if began <= first_audio else None

    def flush(self) -> None:
        """Publish every answered run still open (the call is ending)."""
        for run_id in list(self._runs):
            self.finish(run_id)

    def _emit(self, run_id: str, run: _Run) -> TurnLatency | None:
        first_audio = run.marks.get("first_audio")
        turn = run.turn
        if turn is None or first_audio is None or turn.turn_id not in self._turns:
            return None  # not an answer, or its turn was answered already
        # this turn is answered; older turns nobody answered never will be
        self._turns = {k: t for k, t in self._turns.items() if t.committed > turn.committed}
        audio_end = self._audio_end(turn.committed) if self._audio_end is not None else None
        msg = TurnLatency(
            call_id=self._call_id,
            at=first_audio,
            turn_id=turn.turn_id,
            run_id=run_id,
            clock=self._clock,
            preemptive=run.preemptive,
            audio_end=audio_end,
            vad_end=turn.vad_end,
            stt_final=turn.stt_final,
            committed=turn.committed,
            llm_request=run.marks.get("llm_request"),
            llm_first_token=run.marks.get("llm_first_token"),
            first_sentence=run.marks.get("first_sentence"),
            tts_first_audio=run.marks.get("tts_first_audio"),
            first_audio=first_audio,
            prompt_tokens=run.prompt_tokens,
            cached_tokens=run.cached_tokens,
        )
        self._publish(msg)
        return msg
