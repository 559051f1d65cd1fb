"""The AMD shapes suite (tests/calls/amd-voices) in audio, in every suite voice (issue 19).

Every call of the suite is replayed in audio through the real callee stack
(line model, Silero VAD, whisper tiny.en, AMD) in one of the suite voices
(:data:`SUITE_VOICES`: Piper and three espeak-ng voices). All calls in all
voices would take four times as long as CI can give this test, so each call
runs in one voice, assigned in turn within each expected category: every
voice hears every category and about a quarter of the calls, and every call
is heard. bench/amd.py replays every call in every voice. The agent's side is
bench/amd-agent.yaml's (scripted replies, estimated speech length): AMD never
hears the agent, only how long it talks.

Speech recognition makes mistakes, so accuracy is asserted over each voice's
calls, with the rules that hold on every call: no voicemail message before the
beep or over a tone, carrier messages hang up without a message. bench/amd.py
measures the issue's 97 % per voice over both suites; each voice here hears
about twelve calls, so the floors leave room for a miss or two of recognition
(docs/amd.md, "Per voice"), and the message names every miss. Nothing here
depends on wall-clock speed.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from agent.app.config import load_config
from agent.core import clock
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.recorded_call import RecordedCall
from agent.telephony.sim.voices import SUITE_VOICES
from tests.conftest import CALLS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = CALLS.parents[1]
AGENT = ROOT / "bench" / "amd-agent.yaml"


def assign_voices(calls: list[RecordedCall], voices: tuple[str, ...]) -> dict[str, str]:
    """Each call's voice: in turn within each expected category, by call name.

    A category's first call gets the voice after the previous category's last, so
    the voices share the calls evenly as well as every category.
    """
    by_category: dict[str, list[str]] = defaultdict(list)
    for call in calls:
        by_category[call.expect.amd or "-"].append(call.name)
    assigned: dict[str, str] = {}
    turn = 0
    for category in sorted(by_category):
        for name in sorted(by_category[category]):
            assigned[name] = voices[turn % len(voices)]
            turn += 1
    return assigned


@pytest.fixture(scope="module")
def replayed() -> list[tuple[RecordedCall, str, ReplayedCall]]:
    calls = load_paths([CALLS / "amd-voices"])
    voices = assign_voices(calls, SUITE_VOICES)
    options = ReplayOptions(text_only=False)
    replayer = Replayer(load_config(AGENT), options)

    async def run() -> list[tuple[RecordedCall, str, ReplayedCall]]:
        out = []
        for voice in SUITE_VOICES:
            options.voice = voice
            for call in calls:
                if voices[call.name] == voice:
                    out.append((call, voice, await replayer.replay(call)))
        return out

    return clock.run(run())


def test_each_call_runs_once_and_each_voice_hears_every_category() -> None:
    calls = load_paths([CALLS / "amd-voices"])
    voices = assign_voices(calls, SUITE_VOICES)
    assert set(voices) == {c.name for c in calls}
    categories = {c.expect.amd for c in calls}
    for voice in SUITE_VOICES:
        mine = [c for c in calls if voices[c.name] == voice]
        assert {c.expect.amd for c in mine} == categories, voice
        assert len(mine) >= len(calls) // len(SUITE_VOICES) - 1


#: Right final categories each voice must keep (share of its calls). The espeak-ng
#: voices scored 37/46 overall at commit dca4298 (floors 0.6 and 0.75 then); in the
#: tenth AMD round bench/amd.py gave 44-46 of these 46 calls in every suite voice,
#: so a voice may now miss two of its twelve and the suite four of its 46.
FLOOR = {"piper": 0.9, "espeak": 0.8}
OVERALL_FLOOR = 0.9


def test_final_category_accuracy_holds_per_voice(
    replayed: list[tuple[RecordedCall, str, ReplayedCall]],
) -> None:
    assert len(replayed) == len(load_paths([CALLS / "amd-voices"]))
    misses = [
        f"{call.name} ({voice}): {r.result.amd.category if r.result.amd else None}"
        for call, voice, r in replayed
        if any(f.key == "amd" for f in r.result.failures)
    ]
    message = "; ".join(misses)
    for voice in SUITE_VOICES:
        mine = [r for _, v, r in replayed if v == voice]
        right = sum(not any(f.key == "amd" for f in r.result.failures) for r in mine)
        floor = FLOOR["piper" if voice == "piper" else "espeak"]
        assert right >= floor * len(mine), f"{voice}: {right}/{len(mine)}; {message}"
    assert len(replayed) - len(misses) >= OVERALL_FLOOR * len(replayed), message


def test_no_voicemail_message_before_the_beep_or_over_a_tone(
    replayed: list[tuple[RecordedCall, str, ReplayedCall]],
) -> None:
    for call, voice, r in replayed:
        message = r.voicemail_message
        if message is None:
            continue
        tones = [(s, e) for payload, s, e in r.played if payload == "tone"]
        assert not any(s < message[1] and e > message[0] for s, e in tones), (call.name, voice)
        speech_ends = [e for payload, _, e in r.played if payload in ("say", "audio")]
        beeps = [e for s, e in tones if any(end <= s for end in speech_ends)]
        if beeps:
            assert message[0] >= beeps[-1], (call.name, voice)


def test_carrier_messages_hang_up_without_a_message(
    replayed: list[tuple[RecordedCall, str, ReplayedCall]],
) -> None:
    unavailable = [(c, v, r) for c, v, r in replayed if c.expect.amd == "machine-unavailable"]
    assert unavailable
    for call, voice, r in unavailable:
        assert not r.result.voicemail_left, (call.name, voice)
