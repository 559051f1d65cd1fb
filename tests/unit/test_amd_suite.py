"""The AMD suite (tests/calls/amd) replayed text-only through the real actors.

Scripted LLM and estimate TTS, so the whole suite replays in seconds on the
virtual clock; the AMD itself (tones from the audio tap, phrases, the lexical
classifier, timers) and the controller's actions are the real ones. The audio
replay of the same suite is in tests/integration/test_amd_audio.py.
"""

from __future__ import annotations

import statistics

import pytest

from agent.app.call import ModelSet
from agent.app.config import load_config
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from tests.conftest import CALLS
from tests.fakes.models import ScriptedLLM

AMD_CALLS = CALLS / "amd"

# the whole suite replays in the module fixture
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def replayed() -> list[ReplayedCall]:
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=ScriptedLLM(),
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    replayer = Replayer(load_config(), ReplayOptions(text_only=True), models=models)
    calls = load_paths([AMD_CALLS])
    return clock.run(replayer.replay_all(calls))


def test_every_amd_call_meets_its_expectations(replayed: list[ReplayedCall]) -> None:
    failed = {r.result.name: r.result.failures for r in replayed if not r.result.ok}
    assert failed == {}
    assert len(replayed) >= 40


def test_people_who_answer_are_recognised_within_the_latency_target(
    replayed: list[ReplayedCall],
) -> None:
    # from the end of the person's first utterance to the decision: p50 <= 0.6 s
    delays = [
        r.amd_delay
        for r in replayed
        if r.result.amd is not None and r.result.amd.stages == ["human"] and r.amd_delay is not None
    ]
    assert len(delays) >= 10
    assert statistics.median(delays) <= 0.6


def test_voicemail_messages_start_after_the_beep_and_never_overlap_a_tone(
    replayed: list[ReplayedCall],
) -> None:
    with_beep = 0
    for r in replayed:
        message = r.voicemail_message
        if message is None:
            continue
        tones = [(s, e) for payload, s, e in r.played if payload == "tone"]
        assert not any(s < message[1] and e > message[0] for s, e in tones), r.result.name
        speech_ends = [e for payload, _, e in r.played if payload in ("say", "audio")]
        beeps = [e for s, e in tones if any(end <= s for end in speech_ends)]
        if beeps:
            with_beep += 1
            assert message[0] >= beeps[-1], r.result.name
    assert with_beep >= 10


def test_amd_result_carries_stages_and_decision_time(replayed: list[ReplayedCall]) -> None:
    for r in replayed:
        amd = r.result.amd
        assert amd is not None
        if amd.category == "uncertain":
            continue
        assert amd.stages and amd.stages[-1] == amd.category, r.result.name
        assert amd.decided_at is not None and 0 < amd.decided_at <= r.result.duration
