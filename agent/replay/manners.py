"""Manners: did the agent talk over a callee who had not finished?

A *cut-in* is an agent turn whose first audio starts before the callee's last
word of the utterance it answers has ended: inside one of the utterance's
segments, or inside a pause between them ("I was wondering if we could move it
to ... Thursday"). The rule is pure: it reads what the simulator played
(:attr:`agent.telephony.sim.simulator.CallSimulator.played`), the recorded call's
segments (for their triggers) and the agent's speech start times.

An *utterance* is a maximal run of speech segments (``say`` / ``audio``) where
each next one is triggered ``after: previous`` with a pause below
:data:`MAX_PAUSE` seconds: the callee goes on without waiting for the agent.
The pause is the declared ``gap`` (plus the ``gap`` and length of any explicit
``silence`` segments triggered ``after: previous`` in between), not the played
times, so the grouping is the same on the virtual and the wall clock. Anything
else between two speech segments (a tone, DTMF, an ``after: agent_turn`` or
``at:`` trigger, a longer pause) ends the utterance.

Boundaries do not count: an agent start exactly when the utterance's first
segment starts, or exactly when its last segment ends, is not a cut-in. An agent
that was already speaking when the callee started (a barge-in) did not cut in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.messages import AgentSpeechStarted
from agent.telephony.sim.recorded_call import (
    AfterEvent,
    AfterTrigger,
    AudioPayload,
    DtmfPayload,
    HangupPayload,
    Payload,
    SayPayload,
    Segment,
    SilencePayload,
    TonePayload,
)

__all__ = [
    "MAX_PAUSE",
    "CutIn",
    "CutIns",
    "Utterance",
    "count_cut_ins",
    "find_cut_ins",
    "first_speech_starts",
    "payload_name",
    "utterances",
]

#: A pause this long or longer (seconds) between two callee speech segments splits
#: them into two utterances.
MAX_PAUSE = 1.5

_SPEECH = ("say", "audio")

Played = Sequence[tuple[str, float, float]]


@dataclass(frozen=True, slots=True)
class Utterance:
    """A run of callee speech segments with only short pauses between them.

    Attributes:
        index: position among the call's utterances (0-based).
        segments: indices of its segments in the call's ``callee`` list (and in
            ``played``), in order.
        start: when its first segment started playing.
        end: when its last segment ended.
        spans: (start, end) of each of its speech segments, in order.
    """

    index: int
    segments: tuple[int, ...]
    start: float
    end: float
    spans: tuple[tuple[float, float], ...]

    def in_pause(self, at: float) -> bool:
        """Whether ``at`` falls in a pause between two of its speech segments (ends included)."""
        return any(
            prev_end <= at <= next_start
            for (_, prev_end), (next_start, _) in zip(self.spans, self.spans[1:], strict=False)
        )


@dataclass(frozen=True, slots=True)
class CutIn:
    """An agent turn that started while the callee was still in an utterance.

    Attributes:
        at: when the agent's first audio started (the time base of ``played``).
        utterance: the utterance it cut into.
        in_pause: the agent started in a pause between two of the utterance's
            segments (rather than while the callee was speaking).
    """

    at: float
    utterance: Utterance
    in_pause: bool


@dataclass(frozen=True, slots=True)
class CutIns:
    """The cut-ins of one call, and the utterances they were looked for in.

    Attributes:
        utterances: every callee utterance that was played, in order.
        cut_ins: every cut-in, in order of time.
    """

    utterances: tuple[Utterance, ...]
    cut_ins: tuple[CutIn, ...]

    @property
    def count(self) -> int:
        """How many agent turns cut in."""
        return len(self.cut_ins)


def payload_name(payload: Payload) -> str:
    """The name the simulator records in ``played`` for a segment's payload."""
    match payload:
        case SayPayload():
            return "say"
        case AudioPayload():
            return "audio"
        case TonePayload():
            return "tone"
        case SilencePayload():
            return "silence"
        case DtmfPayload():
            return "dtmf"
        case HangupPayload():
            return "hangup"


def _continues(segment: Segment) -> float | None:
    """The pause before ``segment`` if the callee goes on without waiting, else None."""
    match segment.trigger:
        case AfterTrigger(event=AfterEvent.PREVIOUS, gap=gap):
            return gap
    return None


def utterances(
    played: Played, segments: Sequence[Segment], *, max_pause: float = MAX_PAUSE
) -> list[Utterance]:
    """Group the played callee segments into utterances.

    Args:
        played: ``(payload, start, end)`` per played segment, as
            :attr:`CallSimulator.played` records them: the first ``len(played)``
            segments of the call, in order (a hang-up is never recorded).
        segments: the recorded call's ``callee`` segments.
        max_pause: a pause this long or longer ends an utterance.

    Returns:
        The utterances, in order.

    Raises:
        ValueError: ``played`` does not match the start of ``segments``.
    """
    if len(played) > len(segments):
        raise ValueError(f"{len(played)} segments played but the call has {len(segments)}")
    for i, ((name, _, _), segment) in enumerate(zip(played, segments, strict=False)):
        expected = payload_name(segment.payload)
        if name != expected:
            raise ValueError(f"played[{i}] is {name!r} but callee[{i}] is {expected!r}")

    out: list[Utterance] = []
    current: list[int] = []
    pause = 0.0  # declared pause since the last speech segment of ``current``

    def close() -> None:
        if current:
            spans = tuple((played[i][1], played[i][2]) for i in current)
            out.append(Utterance(len(out), tuple(current), spans[0][0], spans[-1][1], spans))
            current.clear()

    for i, (name, _, _) in enumerate(played):
        gap = _continues(segments[i])
        if name in _SPEECH:
            if not current or gap is None or pause + gap >= max_pause:
                close()
            current.append(i)
            pause = 0.0
            continue
        silence = segments[i].payload
        if current and gap is not None and isinstance(silence, SilencePayload):
            pause += gap + silence.seconds  # an explicit pause, still inside the utterance
            continue
        close()
    close()
    return out


def find_cut_ins(
    played: Played,
    segments: Sequence[Segment],
    speech_starts: Sequence[float],
    *,
    max_pause: float = MAX_PAUSE,
) -> CutIns:
    """Find the agent turns that started inside a callee utterance.

    Args:
        played: ``(payload, start, end)`` per played segment (see :func:`utterances`).
        segments: the recorded call's ``callee`` segments.
        speech_starts: when each agent turn's first audio started, in the time
            base of ``played`` (see :func:`first_speech_starts`).
        max_pause: a pause this long or longer ends an utterance.

    Returns:
        The utterances and the cut-ins: each start strictly after an utterance's
        first segment started and strictly before its last segment ended.

    Raises:
        ValueError: ``played`` does not match the start of ``segments``.
    """
    found = utterances(played, segments, max_pause=max_pause)
    cut_ins = [
        CutIn(at, u, u.in_pause(at))
        for at in sorted(speech_starts)
        for u in found
        if u.start < at < u.end
    ]
    return CutIns(tuple(found), tuple(cut_ins))


def first_speech_starts(messages: Sequence[object]) -> list[float]:
    """The time of each agent turn's first audio: the first ``AgentSpeechStarted`` per run.

    A reply that pauses and resumes (after a false interruption) starts speaking
    again under the same run id; that is not a new turn.
    """
    seen: set[str] = set()
    out: list[float] = []
    for msg in messages:
        match msg:
            case AgentSpeechStarted(at=at, run_id=run_id) if run_id not in seen:
                seen.add(run_id)
                out.append(at)
    return out


def count_cut_ins(played: Played, segments: Sequence[Segment], messages: Sequence[object]) -> int:
    """How many agent turns of a replayed call cut into a callee utterance.

    Args:
        played: :attr:`CallSimulator.played` (loop time).
        segments: the recorded call's ``callee`` segments.
        messages: every message of the call's bus, in order (loop time).

    Returns:
        The number of cut-ins (see :func:`find_cut_ins`).
    """
    return find_cut_ins(played, segments, first_speech_starts(messages)).count
