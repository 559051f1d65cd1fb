"""The AMD suite (tests/calls/amd) replayed with audio through the real local models.

Callee speech is synthesised (Piper, cached), sent through the line model and
heard by Silero VAD and whisper; beeps and SIT tones reach the AMD through the
audio tap. Speech recognition makes mistakes, so this asserts the issue's
targets over the suite (at least 95 % of final categories right, voicemail
messages after the beep in at least 95 % of calls with one and never over a
tone) rather than every call. Nothing here depends on wall-clock speed.
"""

from __future__ import annotations

import pytest

from agent.app.config import load_config
from agent.core import clock
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from tests.conftest import CALLS

# the whole suite replays in the module fixture: minutes, not the default 120 s
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

AMD_CALLS = CALLS / "amd"


@pytest.fixture(scope="module")
def replayed() -> list[ReplayedCall]:
    replayer = Replayer(load_config(), ReplayOptions(text_only=False))
    return clock.run(replayer.replay_all(load_paths([AMD_CALLS])))


def test_final_category_accuracy_is_at_least_95_percent(replayed: list[ReplayedCall]) -> None:
    judged = [r for r in replayed if r.result.amd is not None]
    misses = {
        r.result.name: r.result.amd.category  # type: ignore[union-attr]
        for r in judged
        if any(f.key == "amd" for f in r.result.failures)
    }
    assert len(judged) >= 40
    assert len(misses) <= 0.05 * len(judged), misses


def test_voicemail_messages_follow_the_beep(replayed: list[ReplayedCall]) -> None:
    after = with_beep = 0
    for r in replayed:
        tones = [(s, e) for payload, s, e in r.played if payload == "tone"]
        message = r.voicemail_message
        if message is not None:
            assert not any(s < message[1] and e > message[0] for s, e in tones), r.result.name
        speech_ends = [e for payload, _, e in r.played if payload in ("say", "audio")]
        beeps = [e for s, e in tones if any(end <= s for end in speech_ends)]
        if beeps and r.result.amd is not None and r.result.amd.category == "machine-vm":
            with_beep += 1
            after += message is not None and message[0] >= beeps[-1]
    assert with_beep >= 10
    assert after >= 0.95 * with_beep


def test_unavailable_and_sit_calls_hang_up_without_a_message(
    replayed: list[ReplayedCall],
) -> None:
    unavailable = [r for r in replayed if r.result.name.startswith("unavailable-")]
    assert unavailable
    for r in unavailable:
        assert r.result.disposition == "unavailable", r.result.name
        assert not r.result.voicemail_left
