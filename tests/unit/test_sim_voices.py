"""Callee voice strings (agent/telephony/sim/voices.py): parsing, per-call variation, espeak-ng."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.telephony.sim.voices import (
    VoicedSynth,
    VoiceError,
    check_installed,
    espeak_voices,
    parse_voice,
)


def test_piper_and_espeak_strings_parse() -> None:
    assert parse_voice("piper").resolve("any").id == "piper-joe"
    v = parse_voice("espeak:en-029+m2:speed=130-160:pitch=20")
    assert (v.accent, v.variant, v.speed, v.pitch) == ("en-029", "m2", (130, 160), (20, 20))
    assert parse_voice("espeak").accent == "en-us"


def test_speed_and_pitch_vary_per_call_and_repeat_per_call() -> None:
    v = parse_voice("espeak:en-us:speed=120-300:pitch=0-99")
    ids = {v.resolve(f"call-{i}").id for i in range(20)}
    assert len(ids) > 10
    assert v.resolve("call-1") == v.resolve("call-1")
    r = v.resolve("call-1")
    assert 120 <= r.speed <= 300 and 0 <= r.pitch <= 99


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("festival", "unknown voice 'festival'"),
        ("espeak:en-us:speed=5", "speed must be"),
        ("espeak:en-us:pitch=50-20", "pitch must be"),
        ("espeak:en-us:volume=3", "unknown option 'volume'"),
    ],
)
def test_bad_voice_strings_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(VoiceError, match=says):
        parse_voice(text)


def test_uninstalled_espeak_voice_is_named() -> None:
    with pytest.raises(VoiceError, match="no voice 'xx-nowhere'"):
        check_installed(parse_voice("espeak:xx-nowhere"))


def test_a_variant_named_as_listed_points_to_its_file_name() -> None:
    # espeak-ng lists "Steph" but reads "+steph"; "+Steph" would be said in the plain voice
    _, variants = espeak_voices()
    if "steph" not in variants:
        pytest.skip("this espeak-ng has no steph variant")
    with pytest.raises(VoiceError, match="no variant 'Steph'.*did you mean 'steph'"):
        check_installed(parse_voice("espeak:en-us+Steph"))
    check_installed(parse_voice("espeak:en-us+steph"))


def test_espeak_speech_is_synthesised_and_cached_per_voice(tmp_path: Path) -> None:
    fast = parse_voice("espeak:en-us:speed=220:pitch=50").resolve("c")
    slow = parse_voice("espeak:en-us:speed=120:pitch=50").resolve("c")
    synth = VoicedSynth(tmp_path, fast)
    a = synth("Please leave a message after the tone.", 16000)
    synth.voice = slow
    b = synth("Please leave a message after the tone.", 16000)
    assert a.dtype == np.float32 and 0.3 < float(np.abs(a).max()) <= 0.71
    assert len(b) > 1.3 * len(a)  # the slower voice takes longer to say it
    assert len(list(tmp_path.rglob("*.npy"))) == 2
