"""Per-call and per-line callee voices (`voice:`) and `replay --voices` (issue 19).

The loader refuses bad voice strings with the file, line and key; the replay says
each line in the voice its line, its call or the run names, in that order, and the
result JSON names the voice only when one was chosen.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from agent.app.cli.main import app
from agent.app.config import load_config
from agent.core import Bus
from agent.replay.loader import RecordedCallError, load_call
from agent.replay.results import CallResult
from agent.replay.runner import Replayer, ReplayOptions, voice_problem
from agent.telephony.sim.recorded_call import SayPayload
from agent.telephony.sim.simulator import CallSimulator

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng")

TEXT = "Thanks for calling, please leave a message after the tone."


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "v.call.yaml"
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def _load_error(tmp_path: Path, body: str) -> RecordedCallError:
    with pytest.raises(RecordedCallError) as caught:
        load_call(_write(tmp_path, body))
    return caught.value


def test_a_call_and_its_lines_name_voices(tmp_path: Path) -> None:
    call = load_call(
        _write(
            tmp_path,
            """
            name: v
            voice: "espeak:en-029+m2:speed=130-160"
            callee:
              - at: 0.5
                say: "Hello?"
                voice: piper
              - after: previous
                say: "Anyone there?"
            """,
        )
    )
    assert call.voice == "espeak:en-029+m2:speed=130-160"
    assert call.callee[0].payload == SayPayload("Hello?", None, "piper")
    assert call.callee[1].payload == SayPayload("Anyone there?", None, None)


@pytest.mark.parametrize(
    ("body", "where", "says"),
    [
        ("voice: festival\ncallee: []\n", ":2: voice:", "unknown voice 'festival'"),
        ("voice: 3\ncallee: []\n", ":2: voice:", "expected a voice name"),
        (
            "callee:\n  - at: 0.5\n    say: hi\n    voice: 'espeak:en-us:speed=9'\n",
            ":5: callee[0].voice:",
            "speed must be a number or range LOW-HIGH within 80-450",
        ),
        (
            "callee:\n  - at: 0.5\n    tone: {hz: 1000, seconds: 0.5}\n    voice: piper\n",
            ":5: callee[0].voice:",
            "'voice' only goes with a synthesised 'say'",
        ),
    ],
)
def test_a_bad_voice_names_the_file_line_and_key(
    tmp_path: Path, body: str, where: str, says: str
) -> None:
    error = _load_error(tmp_path, "name: v\n" + body)
    assert where in str(error)
    assert says in str(error)
    assert str(error).startswith(str(tmp_path / "v.call.yaml"))


def test_a_voice_on_a_recorded_audio_file_is_refused(tmp_path: Path) -> None:
    audio = Path(__file__).resolve().parents[1] / "calls" / "audio" / "sam-intro-8k.wav"
    (tmp_path / "a.wav").write_bytes(audio.read_bytes())
    error = _load_error(
        tmp_path,
        """
        name: v
        callee:
          - at: 0.5
            say: "Hi"
            audio: a.wav
            voice: piper
        """,
    )
    assert "callee[0].voice" in str(error) and "no 'audio' file" in str(error)


@needs_espeak
def test_an_accent_espeak_does_not_have_is_refused_at_load(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "name: v\nvoice: 'espeak:xx-nowhere'\n")
    assert ":2: voice:" in str(error) and "no voice 'xx-nowhere'" in str(error)


@needs_espeak
def test_a_run_voice_espeak_does_not_have_is_named() -> None:
    problem = voice_problem([], ["piper", "espeak:en-us+nosuchvariant"])
    assert problem is not None and problem.startswith("--voices: ")
    assert "no variant 'nosuchvariant'" in problem
    assert voice_problem([], ["piper", "espeak:en-gb"]) is None


def _prepared(replayer: Replayer, tmp_path: Path, body: str, default: object) -> list[np.ndarray]:
    call = load_call(_write(tmp_path, body))
    sim = CallSimulator(
        call,
        bus=Bus("voices"),
        text_only=False,
        synth=default,  # type: ignore[arg-type]
        line_synth=replayer.line_synth(call, default),  # type: ignore[arg-type]
    )
    sim.prepare()
    return [seg.audio for seg in sim.segments]


class _Default:
    """The replay's default synthesiser, recording what it was asked to say."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def __call__(self, text: str, rate: int) -> np.ndarray:
        self.said.append(text)
        return np.full(rate // 10, 0.1, dtype=np.float32)


@needs_espeak
def test_each_line_is_said_in_the_line_then_call_then_run_voice(tmp_path: Path) -> None:
    options = ReplayOptions(cache_dir=tmp_path / "cache", voice="espeak:en-us:speed=300:pitch=50")
    replayer = Replayer(load_config(), options)
    default = _Default()
    slow, fast = _prepared(
        replayer,
        tmp_path,
        f"""
        name: v
        voice: "espeak:en-us:speed=110:pitch=50"
        callee:
          - at: 0.5
            say: "{TEXT}"
          - after: previous
            say: "{TEXT}"
            voice: "espeak:en-us:speed=400:pitch=50"
        """,
        default,
    )
    # the call's slow voice, then the line's fast one: the same words take longer slowly
    assert len(slow) > 2 * len(fast)
    options.voice = "espeak:en-us:speed=200:pitch=50"
    (middle,) = _prepared(
        replayer, tmp_path, f'name: w\ncallee:\n  - at: 0.5\n    say: "{TEXT}"\n', default
    )
    assert len(fast) < len(middle) < len(slow)  # a call naming no voice gets the run's
    assert default.said == []
    assert len(list((tmp_path / "cache").rglob("*.npy"))) == 3  # cached per voice and text


def test_without_any_voice_named_the_default_synthesiser_says_every_line(tmp_path: Path) -> None:
    replayer = Replayer(load_config(), ReplayOptions(cache_dir=tmp_path / "cache"))
    default = _Default()
    _prepared(
        replayer,
        tmp_path,
        'name: v\ncallee:\n  - at: 0.5\n    say: "Hello?"\n  - after: previous\n    say: "Hi"\n',
        default,
    )
    assert default.said == ["Hello?", "Hi"]


def test_the_result_names_the_voice_only_when_one_was_chosen() -> None:
    plain = json.loads(CallResult(name="x", disposition="completed", duration=1.0).to_json_line())
    voiced = json.loads(
        CallResult(name="x", voice="piper", disposition="completed", duration=1.0).to_json_line()
    )
    assert "voice" not in plain
    assert voiced["voice"] == "piper"
    assert list(voiced)[:2] == ["name", "voice"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--voices", "festival"], "--voices: unknown voice 'festival'"),
        (["--voices", "piper,,piper"], "--voices: expected comma-separated voice names"),
        (["--voices", "piper,piper"], "--voices: a voice is named twice"),
        (["--voices", "piper", "--text-only"], "--voices: --text-only replays synthesise"),
    ],
)
def test_bad_voices_on_the_command_line_exit_2_with_one_line(args: list[str], says: str) -> None:
    call = Path(__file__).resolve().parents[1] / "calls" / "outbound-busy.call.yaml"
    result = CliRunner().invoke(app, ["replay", str(call), *args])
    assert result.exit_code == 2
    assert says in " ".join(result.output.split())


def test_a_call_file_with_a_bad_voice_exits_2_naming_file_line_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: v\ncallee:\n  - at: 0.5\n    say: hi\n    voice: espeek\n")
    result = CliRunner().invoke(app, ["replay", str(path), "--text-only"])
    assert result.exit_code == 2
    assert f"{path}:5: callee[0].voice: unknown voice 'espeek'" in " ".join(result.output.split())
