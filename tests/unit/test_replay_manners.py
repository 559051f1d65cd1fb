"""The cut-in rule (agent/replay/manners.py) and the mid-sentence pause suite."""

from __future__ import annotations

from typing import Any

import pytest

from agent.app.call import ModelSet
from agent.app.config import AgentConfig
from agent.core import clock
from agent.core.messages import AgentSpeechStarted
from agent.models.estimate_tts import EstimateTTS
from agent.replay.loader import load_paths
from agent.replay.manners import (
    count_cut_ins,
    find_cut_ins,
    first_speech_starts,
    utterances,
)
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from agent.telephony.sim.recorded_call import RecordedCall, Segment
from tests.conftest import CALLS
from tests.fakes.models import ScriptedLLM

PAUSES = CALLS / "pauses"


def _segments(*items: dict[str, Any]) -> tuple[Segment, ...]:
    return RecordedCall.model_validate({"name": "t", "callee": list(items)}).callee


def _say(text: str = "words", **trigger: Any) -> dict[str, Any]:
    return {"say": text, **(trigger or {"after": "agent_turn"})}


# "I was wondering if we could move it to" (0-2) ... 0.6 s ... "Thursday?" (2.6-3.4)
SPLIT = _segments(_say(at=0.0), _say(after="previous", gap=0.6), _say(after="agent_turn", gap=0.5))
SPLIT_PLAYED = [("say", 0.0, 2.0), ("say", 2.6, 3.4), ("say", 6.0, 7.0)]


def _cut_at(*starts: float) -> list[float]:
    return [c.at for c in find_cut_ins(SPLIT_PLAYED, SPLIT, list(starts)).cut_ins]


def test_a_pause_below_the_limit_keeps_one_utterance() -> None:
    found = utterances(SPLIT_PLAYED, SPLIT)
    assert [(u.segments, u.start, u.end) for u in found] == [((0, 1), 0.0, 3.4), ((2,), 6.0, 7.0)]


def test_the_agent_starting_in_the_pause_cuts_in() -> None:
    result = find_cut_ins(SPLIT_PLAYED, SPLIT, [2.3])
    assert result.count == 1
    (cut,) = result.cut_ins
    assert cut.at == 2.3 and cut.utterance.index == 0 and cut.in_pause


def test_the_agent_starting_while_the_callee_speaks_cuts_in() -> None:
    result = find_cut_ins(SPLIT_PLAYED, SPLIT, [1.0, 3.0, 6.5])
    assert [(c.at, c.utterance.index, c.in_pause) for c in result.cut_ins] == [
        (1.0, 0, False),
        (3.0, 0, False),
        (6.5, 1, False),
    ]


def test_answering_after_the_last_word_is_not_a_cut_in() -> None:
    assert _cut_at(3.9, 4.5, 7.5) == []


def test_boundaries_are_not_cut_ins() -> None:
    # exactly at the utterance's first start or last end
    assert _cut_at(0.0, 3.4, 6.0, 7.0) == []
    # but the pause's own edges are inside the utterance
    assert _cut_at(2.0, 2.6) == [2.0, 2.6]


def test_starts_are_reported_in_order_of_time() -> None:
    assert _cut_at(3.0, 2.3) == [2.3, 3.0]


def test_a_pause_of_the_limit_or_longer_splits_the_utterance() -> None:
    played = [("say", 0.0, 1.0), ("say", 2.5, 3.0)]
    long = _segments(_say(at=0.0), _say(after="previous", gap=1.5))
    assert [u.segments for u in utterances(played, long)] == [(0,), (1,)]
    assert find_cut_ins(played, long, [2.0]).count == 0
    short = _segments(_say(at=0.0), _say(after="previous", gap=1.49))
    assert [u.segments for u in utterances(played, short)] == [(0, 1)]
    assert find_cut_ins(played, short, [2.0]).count == 1


def test_the_limit_can_be_changed() -> None:
    assert find_cut_ins(SPLIT_PLAYED, SPLIT, [2.3], max_pause=0.5).count == 0


def test_a_line_that_waits_for_the_agent_starts_a_new_utterance() -> None:
    # the callee waited for the agent (even if it said nothing): not one utterance
    segments = _segments(_say(at=0.0), _say(after="agent_turn", gap=0.2, timeout=1.0))
    played = [("say", 0.0, 1.0), ("say", 2.2, 3.0)]
    assert [u.segments for u in utterances(played, segments)] == [(0,), (1,)]
    assert find_cut_ins(played, segments, [1.5]).count == 0


def test_an_at_trigger_starts_a_new_utterance() -> None:
    segments = _segments(_say(at=0.0), _say(at=1.2))
    played = [("say", 0.0, 1.0), ("say", 1.2, 2.0)]
    assert find_cut_ins(played, segments, [1.1]).count == 0


def test_a_barge_in_after_the_agent_started_is_not_a_cut_in() -> None:
    # barge-in-interrupts-agent: "Hello?", the agent starts at 1.4, the callee talks over it
    segments = _segments(
        _say("Hello?", at=0.5),
        _say("Sorry, who is this?", after="agent_speech_start", gap=0.8, timeout=10.0),
        _say("Call me back tomorrow?", after="agent_turn", gap=0.5),
    )
    played = [("say", 0.5, 0.9), ("say", 2.2, 4.9), ("say", 8.0, 9.0)]
    assert find_cut_ins(played, segments, [1.4, 5.4, 9.5]).count == 0
    # the agent starting simultaneously with the callee is not a cut-in either
    assert find_cut_ins(played, segments, [2.2]).count == 0
    # a new reply while the callee is still talking over the agent is one
    assert [c.at for c in find_cut_ins(played, segments, [1.4, 3.0]).cut_ins] == [3.0]


def test_tones_and_dtmf_are_not_speech_and_end_an_utterance() -> None:
    segments = _segments(
        _say("Hi, this is Dana.", at=0.5),
        {"after": "previous", "gap": 0.3, "tone": {"hz": 1000, "seconds": 0.5}},
        _say("Leave a message.", after="previous", gap=0.2),
        {"after": "previous", "gap": 0.2, "dtmf": "1"},
        _say("Thanks.", after="previous", gap=0.2),
    )
    played = [
        ("say", 0.5, 1.5),
        ("tone", 1.8, 2.3),
        ("say", 2.5, 3.5),
        ("dtmf", 3.7, 3.8),
        ("say", 4.0, 4.5),
    ]
    assert [u.segments for u in utterances(played, segments)] == [(0,), (2,), (4,)]
    assert find_cut_ins(played, segments, [2.0, 3.75]).count == 0


def test_audio_files_are_speech(tmp_path: Any) -> None:
    import numpy as np
    import soundfile as sf

    path = tmp_path / "words.wav"
    sf.write(path, np.zeros(1600, dtype=np.float32), 16000)
    segments = _segments(
        {"at": 0.0, "audio": str(path)}, {"after": "previous", "gap": 0.5, "audio": str(path)}
    )
    played = [("audio", 0.0, 0.1), ("audio", 0.6, 0.7)]
    assert find_cut_ins(played, segments, [0.3]).count == 1


def test_explicit_silence_in_a_pause_counts_as_pause() -> None:
    def segments(seconds: float) -> tuple[Segment, ...]:
        return _segments(
            _say(at=0.0),
            {"after": "previous", "silence": seconds},
            _say(after="previous", gap=0.3),
        )

    played = [("say", 0.0, 1.0), ("silence", 1.0, 1.5), ("say", 1.8, 2.5)]
    assert [u.segments for u in utterances(played, segments(0.5))] == [(0, 2)]
    assert find_cut_ins(played, segments(0.5), [1.2]).count == 1
    # 1.2 s of silence + 0.3 s gap reaches the limit: two utterances
    played = [("say", 0.0, 1.0), ("silence", 1.0, 2.2), ("say", 2.5, 3.0)]
    assert [u.segments for u in utterances(played, segments(1.2))] == [(0,), (2,)]
    assert find_cut_ins(played, segments(1.2), [1.2]).count == 0


def test_an_unanswered_call_has_no_utterances() -> None:
    result = find_cut_ins([], (), [])
    assert result.utterances == () and result.count == 0


def test_a_call_cut_short_counts_only_what_was_played() -> None:
    # the hang-up ended the call during the pause: the second half never played
    result = find_cut_ins([("say", 0.0, 2.0)], SPLIT, [2.3])
    assert [u.segments for u in result.utterances] == [(0,)]
    assert result.count == 0


def test_played_must_match_the_call() -> None:
    with pytest.raises(ValueError, match=r"played\[1\] is 'tone' but callee\[1\] is 'say'"):
        utterances([("say", 0.0, 1.0), ("tone", 1.0, 2.0)], SPLIT)
    with pytest.raises(ValueError, match="4 segments played but the call has 3"):
        utterances([*SPLIT_PLAYED, ("say", 8.0, 9.0)], SPLIT)


def test_a_turn_counts_once_however_often_it_starts_speaking() -> None:
    messages: list[object] = [
        AgentSpeechStarted(call_id="c", at=2.3, run_id="speech_a"),
        AgentSpeechStarted(call_id="c", at=3.0, run_id="speech_a"),  # resumed
        "not a message",
        AgentSpeechStarted(call_id="c", at=3.1, run_id="speech_b"),
    ]
    assert first_speech_starts(messages) == [2.3, 3.1]
    assert count_cut_ins(SPLIT_PLAYED, SPLIT, messages) == 2


# -- the pause suite, replayed text-only with scripted models ----------------


def _replay_pauses(**config: Any) -> list[tuple[RecordedCall, ReplayedCall]]:
    calls = load_paths([PAUSES])
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=ScriptedLLM(),
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    replayer = Replayer(AgentConfig(**config), ReplayOptions(text_only=True), models=models)
    results = clock.run(replayer.replay_all(calls))
    return list(zip(calls, results, strict=True))


def _pause_lengths(call: RecordedCall) -> list[float]:
    """The declared mid-utterance pauses of a call."""
    return [
        s.gap or 0.0
        for prev, s in zip(call.callee, call.callee[1:], strict=False)
        if s.after == "previous" and s.say is not None and prev.say is not None
    ]


def _answered_utterances(call: RecordedCall, replayed: ReplayedCall) -> int:
    """Callee utterances the agent started answering before the callee's next one."""
    found = utterances(replayed.played, call.callee)
    agent = [t.start for t in replayed.result.turns if t.role == "agent"]
    count = 0
    for u, nxt in zip(found, [*found[1:], None], strict=True):
        limit = nxt.start if nxt is not None else float("inf")
        count += any(u.end <= start < limit for start in agent)
    return count


def test_the_pause_suite_meets_its_expectations() -> None:
    replayed = _replay_pauses()
    failed = {r.result.name: r.result.failures for _, r in replayed if not r.result.ok}
    assert failed == {}
    assert len(replayed) >= 10
    for call, _ in replayed:
        pauses = _pause_lengths(call)
        assert 1 <= len(pauses) <= 3 and all(0.4 <= p <= 0.8 for p in pauses), call.name
    assert sum(_answered_utterances(call, r) for call, r in replayed) >= 20


def test_text_only_agent_cuts_into_pauses_longer_than_its_endpointing_delay() -> None:
    # text-only, the agent answers min_endpointing_delay (0.5 s) after a final transcript
    for call, r in _replay_pauses(turn={"min_endpointing_delay": 0.5}):
        longer = [p for p in _pause_lengths(call) if p > 0.5]
        assert (r.cut_ins >= len(longer) > 0) or (r.cut_ins == 0 and not longer), call.name


def test_waiting_longer_than_every_pause_makes_no_cut_in() -> None:
    # the opening of an outbound call waits for AMD's verdict instead of the endpointing
    replayed = _replay_pauses(turn={"min_endpointing_delay": 1.0}, amd={"human_silence": 1.0})
    assert {r.result.name: r.cut_ins for _, r in replayed if r.cut_ins} == {}
    assert all(r.result.ok for _, r in replayed)
