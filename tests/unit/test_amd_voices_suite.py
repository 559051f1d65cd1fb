"""The AMD shapes suite (tests/calls/amd-voices) replayed text-only through the real actors.

Menus without "press", business greetings before a menu, directories, language
menus, carrier intercepts in several wordings, voicemail greetings with names
the recogniser garbles, and receptionists who must stay people. The same calls
are replayed in every callee voice, in audio, by bench/amd.py --voices.
"""

from __future__ import annotations

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
    return clock.run(replayer.replay_all(load_paths([CALLS / "amd-voices"])))


def test_every_call_meets_its_expectations(replayed: list[ReplayedCall]) -> None:
    failed = {r.result.name: r.result.failures for r in replayed if not r.result.ok}
    assert failed == {}
    assert len(replayed) >= 40


def test_each_shape_is_covered(replayed: list[ReplayedCall]) -> None:
    by_category: dict[str, int] = {}
    for r in replayed:
        assert r.result.amd is not None
        by_category[r.result.amd.category] = by_category.get(r.result.amd.category, 0) + 1
    assert by_category.get("machine-ivr", 0) >= 20
    assert by_category.get("machine-unavailable", 0) >= 8
    assert by_category.get("machine-vm", 0) >= 8
    assert by_category.get("human", 0) >= 4
