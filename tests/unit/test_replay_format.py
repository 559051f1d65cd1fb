"""Recorded-call format and loader: fixtures load, bad files name the file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import soundfile as sf

from agent.replay.loader import RecordedCallError, load_call, load_paths
from agent.telephony.sim.recorded_call import (
    SPEECH_SECONDS_PER_CHAR,
    AfterEvent,
    AfterTrigger,
    AtTrigger,
    AudioPayload,
    DtmfPayload,
    HangupPayload,
    Payload,
    RecordedCall,
    SayPayload,
    SilencePayload,
    TonePayload,
    estimated_speech_seconds,
)

ROOT = Path(__file__).resolve().parents[2]
CALLS = ROOT / "tests" / "calls"
DEMO = ROOT / "configs" / "demo"
AMD_CALLS = CALLS / "amd"
FIXTURES = sorted(CALLS.glob("*.call.yaml")) + sorted(DEMO.glob("*.call.yaml"))
AMD_FIXTURES = sorted(AMD_CALLS.glob("*.call.yaml"))
DTMF_SECONDS_PER_KEY = 0.25  # generous: a 100 ms tone and a 100 ms pause


def _payload_seconds(payload: Payload) -> float:
    match payload:
        case SayPayload(text=text, audio=None):
            return estimated_speech_seconds(text)
        case SayPayload(audio=Path() as path) | AudioPayload(path=path):
            return sf.info(str(path)).duration
        case TonePayload(seconds=seconds) | SilencePayload(seconds=seconds):
            return seconds
        case DtmfPayload(digits=digits):
            return DTMF_SECONDS_PER_KEY * len(digits)
    return 0.0


def _end_if_agent_stays_silent(call: RecordedCall) -> float:
    """When the last segment ends if no agent event ever happens (so timeouts fire)."""
    end = 0.0
    for segment in call.callee:
        match segment.trigger:
            case AtTrigger(seconds=at):
                start = max(at, end)
            case AfterTrigger(event=AfterEvent.PREVIOUS, gap=gap):
                start = end + gap
            case AfterTrigger(gap=gap, timeout=timeout):
                assert timeout is not None, "waits for the agent without a timeout"
                start = end + timeout + gap
        end = start + _payload_seconds(segment.payload)
    return end


@pytest.mark.parametrize("path", FIXTURES + AMD_FIXTURES, ids=lambda p: p.name)
def test_fixture_loads_and_ends_by_itself(path: Path) -> None:
    call = load_call(path)

    assert call.source_path == path
    assert call.max_seconds <= (45 if path.parent == DEMO else 90)
    if call.answered:
        assert isinstance(call.callee[-1].payload, HangupPayload)
        assert _end_if_agent_stays_silent(call) < call.max_seconds
        assert call.expect.disposition in ("completed", "voicemail", "unavailable")
        # every answered outbound call says what AMD must conclude
        assert call.expect.amd is not None or call.direction == "inbound"
    else:
        assert call.expect.disposition == call.answer.status


def test_amd_suite_covers_every_category() -> None:
    calls = load_paths([AMD_CALLS])
    assert len(calls) >= 40
    finals = {c.expect.amd for c in calls}
    assert finals == {
        "human",
        "machine-vm",
        "machine-ivr",
        "machine-screening",
        "machine-unavailable",
        "uncertain",
    }
    stages = {tuple(c.expect.amd_stages or ()) for c in calls}
    for seq in (
        ("machine-screening", "human"),
        ("machine-screening", "machine-vm"),
        ("machine-ivr", "human"),
        ("machine-ivr", "machine-vm"),
        ("machine-unavailable",),
        ("machine-vm",),
        ("human",),
    ):
        assert seq in stages, seq


def test_suites_load_with_unique_names() -> None:
    calls = load_paths([CALLS, DEMO])

    assert len(calls) == len(FIXTURES) >= 16
    assert [c.source_path for c in calls] == FIXTURES
    assert all(c.name == c.source_path.name.removesuffix(".call.yaml") for c in calls)


def _features(call: RecordedCall) -> set[str]:
    found = {f"direction:{call.direction}", "line:none" if call.line is None else "line:model"}
    if call.direction == "outbound":
        found.add(f"answer:{call.answer.status}")
    if call.line is not None:
        found.add(f"codec:{call.line.codec}")
        found |= {"noise"} if call.line.noise_db is not None else set()
    for segment in call.callee:
        match segment.trigger:
            case AtTrigger():
                found.add("at")
            case AfterTrigger(event=event, gap=gap, timeout=timeout, digits=digits):
                found.add(f"after:{event}")
                found |= {"gap"} if gap else set()
                found |= {"timeout"} if timeout is not None else set()
                if event is AfterEvent.DTMF:
                    found.add("dtmf-digits" if digits else "dtmf-any")
        match segment.payload:
            case SayPayload(audio=None):
                found.add("say")
            case SayPayload(audio=Path() as path):
                found.add("say+audio")
                found |= {"stereo-44k"} if sf.info(str(path)).channels == 2 else set()
            case AudioPayload():
                found.add("audio")
            case TonePayload(hz=hz):
                found.add("tone-dual" if len(hz) == 2 else "tone")
            case SilencePayload():
                found.add("silence")
            case DtmfPayload():
                found.add("dtmf")
            case HangupPayload():
                found.add("hangup")
    return found


def test_call_suite_covers_every_trigger_payload_answer_and_line() -> None:
    found = set().union(*(_features(call) for call in load_paths([CALLS])))

    assert found >= {
        "at",
        "after:previous",
        "after:agent_turn",
        "after:agent_speech_start",
        "dtmf-any",
        "dtmf-digits",
        "gap",
        "timeout",
        "say",
        "say+audio",
        "stereo-44k",
        "audio",
        "tone",
        "tone-dual",
        "silence",
        "dtmf",
        "hangup",
        "answer:answered",
        "answer:busy",
        "answer:no-answer",
        "answer:failed",
        "answer:rejected",
        "direction:inbound",
        "direction:outbound",
        "line:none",
        "codec:none",
        "codec:pcmu",
        "codec:pcma",
        "noise",
    } - {"codec:none"}


def test_audio_fixtures_are_small_and_all_used() -> None:
    used = {
        segment.audio for call in load_paths([CALLS]) for segment in call.callee if segment.audio
    }
    files = sorted((CALLS / "audio").glob("*.wav"))

    assert {f.resolve() for f in files} == used
    assert all(f.stat().st_size < 100_000 for f in files)


def test_typed_accessors_and_defaults(tmp_path: Path) -> None:
    (tmp_path / "hello.wav").write_bytes((CALLS / "audio" / "sam-intro-8k.wav").read_bytes())
    path = tmp_path / "doc.call.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: doc.example_1
        callee:
          - at: 0.6
            say: "Hi"
            audio: hello.wav
          - after: dtmf
            digits: "2#"
            timeout: 5
            tone: {hz: [350, 440], seconds: 1}
          - after: previous
            dtmf: "12"
          - after: agent_speech_start
            gap: 0.8
            hangup: true
    """)
    )

    call = load_call(path)

    assert (call.direction, call.answer.status, call.answer.after) == ("outbound", "answered", 3.0)
    assert (call.line, call.max_seconds, call.agent, call.expect.amd) == (None, 180.0, {}, None)
    assert [s.trigger for s in call.callee] == [
        AtTrigger(0.6),
        AfterTrigger(AfterEvent.DTMF, 0.0, 5.0, "2#"),
        AfterTrigger(AfterEvent.PREVIOUS),
        AfterTrigger(AfterEvent.AGENT_SPEECH_START, gap=0.8),
    ]
    assert [s.payload for s in call.callee] == [
        SayPayload("Hi", tmp_path.resolve() / "hello.wav"),
        TonePayload((350.0, 440.0), 1.0, -12.0),
        DtmfPayload("12"),
        HangupPayload(),
    ]


def test_estimated_speech_seconds() -> None:
    expected = 11 * SPEECH_SECONDS_PER_CHAR  # "Hello there"
    assert estimated_speech_seconds("  Hello   there ") == pytest.approx(expected)
    assert SPEECH_SECONDS_PER_CHAR == 0.065


# (id, file body, line, key, a fragment of the message); lines are 1-based.
MALFORMED = [
    (
        "missing-trigger",
        "name: c\ncallee:\n  - at: 1\n    say: hi\n  - say: again\n",
        5,
        "callee[1]",
        "no trigger",
    ),
    (
        "two-triggers",
        "name: c\ncallee:\n  - at: 1\n    after: previous\n    say: hi\n",
        4,
        "callee[0].after",
        "two triggers",
    ),
    (
        "two-payloads",
        "name: c\ncallee:\n  - at: 1\n    say: hi\n    tone: {hz: 440, seconds: 1}\n",
        5,
        "callee[0].tone",
        "two payloads ('say' and 'tone')",
    ),
    ("no-payload", "name: c\ncallee:\n  - at: 1\n", 3, "callee[0]", "no payload"),
    (
        "unknown-key",
        "name: c\ncallee:\n  - at: 1\n    tones: {hz: 440, seconds: 1}\n",
        4,
        "callee[0].tones",
        "did you mean 'tone'?",
    ),
    (
        "unknown-top-key",
        "name: c\nmax_second: 30\n",
        2,
        "max_second",
        "did you mean 'max_seconds'?",
    ),
    (
        "bad-tone-hz",
        "name: c\ncallee:\n  - at: 1\n    tone:\n      hz: loud\n      seconds: 1\n",
        5,
        "callee[0].tone.hz",
        "expected a frequency in Hz (number or list of numbers), got 'loud'",
    ),
    (
        "tone-missing-seconds",
        "name: c\ncallee:\n  - at: 1\n    tone:\n      hz: 440\n",
        4,
        "callee[0].tone.seconds",
        "required key 'seconds' is missing",
    ),
    (
        "gap-without-after",
        "name: c\ncallee:\n  - at: 1\n    gap: 0.5\n    say: hi\n",
        4,
        "callee[0].gap",
        "only goes with an 'after:' trigger",
    ),
    (
        "digits-without-dtmf",
        "name: c\ncallee:\n  - after: previous\n    digits: '2'\n    say: hi\n",
        4,
        "callee[0].digits",
        "only goes with 'after: dtmf'",
    ),
    (
        "at-wrong-type",
        "name: c\ncallee:\n  - at: soon\n    say: hi\n",
        3,
        "callee[0].at",
        "expected a number, got 'soon'",
    ),
    (
        "at-negative",
        "name: c\ncallee:\n  - at: -1\n    say: hi\n",
        3,
        "callee[0].at",
        "expected a number >= 0, got -1",
    ),
    ("bad-name", "# a comment\nname: Bad Name\n", 2, "name", "got 'Bad Name'"),
    (
        "missing-name",
        "# a comment\ndescription: no name\ncallee: []\n",
        2,
        "name",
        "required key 'name' is missing",
    ),
    (
        "unknown-after",
        "name: c\ncallee:\n  - after: agent_turns\n    say: hi\n",
        3,
        "callee[0].after",
        "did you mean 'agent_turn'?",
    ),
    (
        "dtmf-number",
        "name: c\ncallee:\n  - at: 1\n    dtmf: 12\n",
        4,
        "callee[0].dtmf",
        "quoted string",
    ),
    (
        "dtmf-bad-key",
        "name: c\ncallee:\n  - at: 1\n    dtmf: '12x'\n",
        4,
        "callee[0].dtmf",
        "got '12x'",
    ),
    (
        "hangup-false",
        "name: c\ncallee:\n  - at: 1\n    hangup: false\n",
        4,
        "callee[0].hangup",
        "hangup: true",
    ),
    (
        "missing-audio",
        "name: c\ncallee:\n  - at: 1\n    say: hi\n    audio: nope.wav\n",
        5,
        "callee[0].audio",
        "audio file not found: 'nope.wav'",
    ),
    (
        "amd-wait",
        "name: c\nexpect:\n  disposition: completed\n  amd: wait\n",
        4,
        "expect.amd",
        "'wait' is never a final",
    ),
    (
        "stages-disagree",
        "name: c\nexpect:\n  amd: human\n  amd_stages: [machine-screening]\n",
        4,
        "expect.amd_stages",
        "must be the final category",
    ),
    (
        "guardrail-typo",
        "name: c\nexpect:\n  guardrail:\n    blocked_user_turn: 0\n",
        4,
        "expect.guardrail.blocked_user_turn",
        "did you mean 'blocked_user_turns'?",
    ),
    (
        "bad-disposition",
        "name: c\nexpect:\n  disposition: done\n",
        3,
        "expect.disposition",
        "expected 'completed', 'voicemail'",
    ),
    (
        "inbound-answer",
        "name: c\ndirection: inbound\nanswer:\n  status: busy\n",
        3,
        "answer",
        "only applies to outbound",
    ),
    (
        "unanswered-callee",
        "name: c\nanswer: {status: busy}\ncallee:\n  - at: 1\n    say: hi\n",
        3,
        "callee",
        "never answered",
    ),
    (
        "after-hangup",
        "name: c\ncallee:\n  - at: 1\n    hangup: true\n  - at: 2\n    say: hi\n",
        5,
        "callee[1]",
        "nothing can follow the hangup",
    ),
    (
        "at-out-of-order",
        "name: c\ncallee:\n  - at: 5\n    say: hi\n  - at: 2\n    say: yo\n",
        5,
        "callee[1].at",
        "earlier than callee[0].at",
    ),
    (
        "at-beyond-max",
        "name: c\nmax_seconds: 10\ncallee:\n  - at: 12\n    say: hi\n",
        4,
        "callee[0].at",
        "not before max_seconds (10)",
    ),
    ("line-codec", "name: c\nline:\n  codec: g729\n", 3, "line.codec", "got 'g729'"),
    (
        "tone-not-mapping",
        "name: c\ncallee:\n  - at: 1\n    tone: 440\n",
        4,
        "callee[0].tone",
        "expected a mapping of keys (hz, seconds, level_db), got 440",
    ),
    (
        "duplicate-key",
        "name: c\ncallee:\n  - at: 1\n    say: hi\n    say: again\n",
        5,
        "callee[0].say",
        "duplicate key",
    ),
    ("yaml-syntax", 'name: c\ncallee:\n  - at: 1\n    say: "unclosed\n', 5, None, "invalid YAML"),
    ("yaml-indent", "name: c\ncallee:\n  - at: 1\n   say: hi\n", 4, None, "invalid YAML"),
    ("not-a-mapping", "- name: c\n", 1, None, "expected a mapping of keys"),
    ("empty-file", "# nothing\n", 1, None, "empty file"),
]


@pytest.mark.parametrize(
    ("body", "line", "key", "fragment"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_file_names_file_line_and_key(
    tmp_path: Path, body: str, line: int, key: str | None, fragment: str
) -> None:
    path = tmp_path / "bad.call.yaml"
    path.write_text(body)

    with pytest.raises(RecordedCallError) as caught:
        load_call(path)

    error = caught.value
    assert (error.file, error.line, error.key) == (path, line, key)
    assert fragment in error.message
    assert "\n" not in str(error)
    assert str(error).startswith(f"{path}:{line}: " + (f"{key}: " if key else ""))


def test_error_reads_as_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.call.yaml"
    path.write_text("name: x\ncallee:\n  - at: 1\n    tone: {hz: loud, seconds: 1}\n")

    with pytest.raises(RecordedCallError) as caught:
        load_call(path)

    assert str(caught.value) == (
        f"{path}:4: callee[0].tone.hz: "
        "expected a frequency in Hz (number or list of numbers), got 'loud'"
    )


def test_unreadable_audio_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "fake.wav").write_text("not audio")
    path = tmp_path / "x.call.yaml"
    path.write_text("name: x\ncallee:\n  - at: 1\n    audio: fake.wav\n")

    with pytest.raises(RecordedCallError) as caught:
        load_call(path)

    assert (caught.value.line, caught.value.key) == (4, "callee[0].audio")
    assert caught.value.message.startswith("cannot read audio file 'fake.wav'")


def test_duplicate_names_in_a_folder_name_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.call.yaml").write_text("name: same\n")
    (tmp_path / "b.call.yaml").write_text("# second\nname: same\n")

    with pytest.raises(RecordedCallError) as caught:
        load_paths([tmp_path])

    assert (caught.value.file, caught.value.line, caught.value.key) == (
        tmp_path / "b.call.yaml",
        2,
        "name",
    )
    assert str(tmp_path / "a.call.yaml") in caught.value.message


def test_folder_is_sorted_by_file_name_and_files_load_once(tmp_path: Path) -> None:
    for name in ("b", "a", "c"):
        (tmp_path / f"{name}.call.yaml").write_text(f"name: call-{name}\n")
    (tmp_path / "notes.yaml").write_text("not a call")

    calls = load_paths([tmp_path, tmp_path / "a.call.yaml"])

    assert [c.name for c in calls] == ["call-a", "call-b", "call-c"]


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("missing.call.yaml", "no such file or folder"),
        ("empty", "no *.call.yaml files in this folder"),
        ("notes.yaml", "expected a *.call.yaml file or a folder"),
    ],
)
def test_bad_paths(tmp_path: Path, name: str, fragment: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.yaml").write_text("name: x\n")

    with pytest.raises(RecordedCallError) as caught:
        load_paths([tmp_path / name])

    assert (caught.value.file, caught.value.line, caught.value.key) == (tmp_path / name, None, None)
    assert str(caught.value) == f"{tmp_path / name}: {fragment}"


def test_yaml_anchors_and_merges_are_understood(tmp_path: Path) -> None:
    path = tmp_path / "x.call.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: x
        callee:
          - at: 1
            tone: &beep {hz: 1000, seconds: 0.5}
          - after: previous
            tone: {<<: *beep, hz: [350, 440]}
    """)
    )

    call = load_call(path)

    assert call.callee[1].payload == TonePayload((350.0, 440.0), 0.5, -12.0)
