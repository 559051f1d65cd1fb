"""What every answered callee turn's latency breakdown must satisfy (the latency gate).

No timing thresholds: only that the breakdown is there, complete and causally ordered.
"""

from __future__ import annotations

import pytest

from agent.core.messages import LATENCY_MILESTONES, LATENCY_STAGES
from agent.replay.results import CallResult, Turn

#: milestones a reply always has, whatever produced it
ALWAYS = ("committed", "tts_first_audio", "first_audio")
#: milestones of a reply the LLM wrote (a spoken ``say`` has none of them)
GENERATED = ("llm_request", "llm_first_token", "first_sentence")


def answered_callee_turns(result: CallResult) -> list[Turn]:
    """Callee turns the agent started answering before the callee spoke again."""
    turns = result.turns
    out = []
    for i, turn in enumerate(turns):
        if turn.role != "callee":
            continue
        later = turns[i + 1 :]
        next_callee = next((t.start for t in later if t.role == "callee"), float("inf"))
        if any(t.role == "agent" and turn.end <= t.start < next_callee for t in later):
            out.append(turn)
    return out


def check_breakdown(turn: Turn, *, audio: bool, line_knows_audio: bool = True) -> None:
    """Assert ``turn`` carries a complete, ordered latency breakdown."""
    lat = turn.latency
    assert lat is not None, f"answered turn {turn.text!r} has no latency breakdown"
    assert list(lat.stages) == list(LATENCY_STAGES)
    assert list(lat.milestones) == list(LATENCY_MILESTONES)
    assert all(v >= 0 for v in lat.stages.values())
    assert sum(lat.stages.values()) == pytest.approx(lat.total, abs=1e-6)
    m = lat.milestones
    required = list(ALWAYS)
    if line_knows_audio:
        required.append("audio_end")
    if audio:
        required += ["vad_end", "stt_final"]
    if m["llm_request"] is not None or m["first_sentence"] is not None:
        required += GENERATED
    missing = [name for name in required if m[name] is None]
    assert not missing, f"turn {turn.text!r}: no {missing}"

    def before(a: str, b: str) -> None:
        if m[a] is not None and m[b] is not None:
            assert m[a] <= m[b] + 1e-6, f"turn {turn.text!r}: {a} {m[a]} after {b} {m[b]}"

    # what causes what: the callee's side, then the reply's chain; with preemptive
    # generation the reply's chain may start before the commit
    for a, b in [
        ("audio_end", "vad_end"),
        ("audio_end", "committed"),
        ("stt_final", "committed"),
        ("llm_request", "llm_first_token"),
        ("llm_first_token", "first_sentence"),
        ("first_sentence", "tts_first_audio"),
        ("tts_first_audio", "first_audio"),
        ("audio_end", "first_audio"),
    ]:
        before(a, b)
    if not lat.preemptive:
        before("committed", "llm_request")
    assert lat.total == pytest.approx(m["first_audio"] - _origin(m), abs=1e-6)


def _origin(m: dict[str, float | None]) -> float:
    for name in LATENCY_MILESTONES[:4]:
        if m[name] is not None:
            return float(m[name])  # type: ignore[arg-type]
    raise AssertionError("no origin")
