"""The command line as a user runs it: ``python -m agent ...`` in a subprocess.

Bad input exits 2 with one line on stderr naming the file, the line and the key;
a replay prints one JSON object per call in the documented key order and exits
1 when a call misses its ``expect``. Only the tests marked ``integration`` load
real models (the local LLM, text-only); the others stop before any model runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CALLS = ROOT / "tests" / "calls"

RESULT_KEYS = [
    "name",
    "ok",
    "amd",
    "disposition",
    "voicemail_left",
    "dtmf_sent",
    "duration",
    "agent_first_audio_at",
    "turns",
    "guardrail",
    "failures",
]


def cli_env() -> dict[str, str]:
    """The environment for a CLI subprocess: plain 80-column output, no guardian settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(NO_COLOR="1", COLUMNS="80")
    env.pop("CALLRT_GUARDIAN_TOKEN", None)
    env.pop("CALLRT_GUARDIAN_URL", None)
    return env


def run_cli(
    *args: str | Path, timeout: float = 60, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m agent ARGS`` from the project root, ``stdin`` given and then closed."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *map(str, args)],
        cwd=ROOT,
        env=env if env is not None else cli_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- bad recorded calls ------------------------------------------------------

UNKNOWN_KEY = """\
name: unknown-key
direction: outbound
callee:
  - at: 0.5
    say: "Hello?"
    colour: red
"""

BAD_TONE_HZ = """\
name: bad-tone
callee:
  - at: 0.5
    say: "Hello?"
  - after: previous
    tone: {hz: -440, seconds: 0.5}
"""

MISSING_TRIGGER = """\
name: missing-trigger
callee:
  - at: 0.5
    say: "Hello?"
  - gap: 0.5
    say: "Anyone there?"
"""


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        (UNKNOWN_KEY, 6, "callee[0].colour"),
        (BAD_TONE_HZ, 6, "callee[1].tone.hz"),
        (MISSING_TRIGGER, 5, "callee[1]"),
    ],
    ids=["unknown-key", "bad-tone-hz", "missing-trigger"],
)
def test_malformed_call_exits_2_with_one_line_naming_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    call = write(tmp_path / "suite" / "bad.call.yaml", text)
    proc = run_cli("replay", call, "--text-only")
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert f"{call}:{line}:" in message
    assert f" {key}:" in message
    assert proc.stdout == ""


def test_malformed_call_in_a_folder_is_named_by_its_own_path(tmp_path: Path) -> None:
    write(tmp_path / "a-good.call.yaml", (CALLS / "outbound-busy.call.yaml").read_text())
    bad = write(tmp_path / "b-bad.call.yaml", UNKNOWN_KEY)
    proc = run_cli("replay", tmp_path, "--text-only")
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert f"{bad}:6:" in message and "callee[0].colour" in message


def test_error_message_keeps_brackets_in_the_path(tmp_path: Path) -> None:
    call = write(tmp_path / "suite[v2]" / "bad.call.yaml", UNKNOWN_KEY)
    proc = run_cli("replay", call, "--text-only")
    assert proc.returncode == 2
    assert f"{call}:6:" in one_line(proc.stderr)


def test_missing_path_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.call.yaml"
    proc = run_cli("replay", missing, "--text-only")
    assert proc.returncode == 2, proc.stderr
    assert str(missing) in one_line(proc.stderr)


@pytest.mark.parametrize("speed", ["0", "fast", "-2"])
def test_bad_speed_exits_2_naming_the_option(speed: str) -> None:
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--speed", speed)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "--speed" in message and speed in message


# -- bad configs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("name: x\nmodles:\n  llm: local/smollm2-135m\n", "modles"),
        ("name: x\nmodels:\n  lmm: local/smollm2-135m\n", "models.lmm"),
        ("name: x\nturn:\n  min_endpointing_delay: -1\n", "turn.min_endpointing_delay"),
        ("amd:\n  no_speech: 3\n", "amd.no_speech"),
        ("amd:\n  uncertain_action: shout\n", "amd.uncertain_action"),
        ("amd:\n  beep_low_hz: 3000\n  beep_high_hz: 2000\n", "amd.beep_high_hz"),
        ("amd:\n  no_speech_timeout: 30\n  hard_timeout: 20\n", "amd.hard_timeout"),
        (
            "guardrails:\n  checks:\n    - hook: on_sentence\n      decisions: [abusive]\n",
            "guardrails.checks.0.hook",
        ),
        (
            "guardrails:\n  checks:\n    - hook: on_user_turn\n      decisions: [abusive]\n"
            "      rules:\n        - {when: rude >= 0.5, action: block}\n",
            "guardrails.checks.0",
        ),
        (
            "guardrails:\n  checks:\n    - hook: on_user_turn\n      decisions: [abusive]\n"
            "      rules:\n        - {when: abusive about 0.5, action: block}\n",
            "guardrails.checks.0.rules.0.when",
        ),
        (
            "guardrails:\n  response:\n    - {name: short, type: max_length, "
            "config: {max_chars: 100}}\n",
            "guardrails",
        ),
        ("guardrails:\n  setup: nosuch.module:setup\n", "guardrails.setup"),
        ("tools:\n  - {function: not-a-path}\n", "tools.0.function"),
        ("transfer:\n  targets: {billing: '555-1234'}\n", "transfer.targets"),
        ("guardian:\n  pin: '12'\n", "guardian.pin"),
        ("tool_gate:\n  mode: maybe\n", "tool_gate.mode"),
        ("watchdog:\n  every: 0\n", "watchdog.every"),
        ("caller_number: '12345'\n", "caller_number"),
    ],
    ids=[
        "unknown-top-key",
        "unknown-nested-key",
        "out-of-range",
        "amd-unknown-key",
        "amd-bad-choice",
        "amd-beep-band",
        "amd-timeouts",
        "guardrail-hook",
        "guardrail-rule-decision",
        "guardrail-rule-syntax",
        "guardrail-enforcing-streamed",
        "guardrail-setup",
        "tool-path",
        "transfer-target",
        "guardian-pin",
        "tool-gate-mode",
        "watchdog-every",
        "caller-number",
    ],
)
def test_bad_config_key_exits_2_naming_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    config = write(tmp_path / "agent.yaml", text)
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message
    assert f" {key}:" in message


def test_config_that_is_not_yaml_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "name: x\nmodels: [local/smollm2-135m\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert f"{config}:3:" in message and "YAML" in message


def test_missing_config_exits_2_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "nope.yaml"
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--config", config)
    assert proc.returncode == 2, proc.stderr
    assert str(config) in one_line(proc.stderr)


def test_unknown_model_in_config_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "models:\n  llm: nosuch/model\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "models.llm" in message


def test_unknown_llm_option_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "models:\n  llm_options: {max_tokenz: 5}\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "models.llm_options" in message and "max_tokenz" in message


def test_unknown_stt_option_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "models:\n  stt_options: {initial_promt: hello}\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "models.stt_options" in message
    assert "initial_promt" in message


def test_unknown_decision_model_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "guardrails:\n  model: nosuch\n  checks: []\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "guardrails.model" in message and "nosuch" in message


def test_bad_response_guardrail_type_exits_2_naming_the_entry(tmp_path: Path) -> None:
    config = write(
        tmp_path / "agent.yaml",
        "guardrails:\n  response:\n    - {name: x, type: 'no.such:Thing', report_only: true}\n",
    )
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "guardrails.response[0].type" in message and "no.such" in message


def test_a_tool_that_cannot_be_imported_exits_2_naming_the_entry(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "tools:\n  - function: 'no.such_module:fn'\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "tools[0].function" in message and "no.such_module" in message


def test_an_unknown_tool_gate_model_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yaml", "tool_gate:\n  model: nosuch\n")
    proc = run_cli("replay", CALLS / "outbound-busy.call.yaml", "--text-only", "--config", config)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert str(config) in message and "tool_gate.model" in message


# -- LiveKit commands (no server needed for their input checks) -----------------

LIVEKIT_ENV = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "LIVEKIT_SIP_OUTBOUND_TRUNK")


def run_livekit_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI with exactly the LiveKit variables in ``env`` (none from the machine)."""
    base = {k: v for k, v in cli_env().items() if k not in LIVEKIT_ENV}
    return run_cli(*args, env={**base, **env})


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["dial", "555-1234"], "NUMBER: expected an E.164 number"),
        (["dial", "+15551234567", "--caller-id", "12"], "--caller-id: expected an E.164"),
        (["dial", "+15551234567", "--agent", "missing.yaml"], "missing.yaml: file not found"),
    ],
)
def test_dial_checks_its_input_before_any_request(args: list[str], needle: str) -> None:
    proc = run_livekit_cli(*args, env={})
    assert proc.returncode == 2, proc.stderr
    assert needle in one_line(proc.stderr)


def test_dial_and_worker_name_every_missing_livekit_variable() -> None:
    for args in (["dial", "+15551234567"], ["worker"]):
        proc = run_livekit_cli(*args, env={"LIVEKIT_URL": "ws://127.0.0.1:7880"})
        assert proc.returncode == 2, proc.stderr
        line = one_line(proc.stderr)
        assert "LIVEKIT_API_KEY" in line and "LIVEKIT_API_SECRET" in line


def test_dial_needs_an_outbound_trunk() -> None:
    env = {"LIVEKIT_URL": "ws://127.0.0.1:7880", "LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s"}
    proc = run_livekit_cli("dial", "+15551234567", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "LIVEKIT_SIP_OUTBOUND_TRUNK" in one_line(proc.stderr)


def test_dial_to_a_server_that_is_not_there_exits_2_naming_it() -> None:
    env = {
        "LIVEKIT_URL": "http://127.0.0.1:9",
        "LIVEKIT_API_KEY": "k",
        "LIVEKIT_API_SECRET": "s",
        "LIVEKIT_SIP_OUTBOUND_TRUNK": "ST_x",
    }
    proc = run_livekit_cli("dial", "+15551234567", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "http://127.0.0.1:9" in one_line(proc.stderr)


# -- decide ------------------------------------------------------------------


def run_decide(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "decide", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_decide_prints_one_json_object_per_line() -> None:
    proc = run_decide(
        "--model",
        "rules",
        "--decision",
        "abusive",
        "-d",
        "human_handoff",
        stdin="you useless idiot\n\ncan I talk to a real person please\n",
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["text"] for r in rows] == ["you useless idiot", "can I talk to a real person please"]
    assert list(rows[0]) == ["text", "results", "errors", "latency"]
    assert rows[0]["results"]["abusive"] >= 0.7 > rows[0]["results"]["human_handoff"]
    assert rows[1]["results"]["human_handoff"] >= 0.7 > rows[1]["results"]["abusive"]
    assert all(r["errors"] == {} and r["latency"] >= 0 for r in rows)


def test_decide_reads_extra_packs(tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    packs.mkdir()
    write(
        packs / "competitor.yaml",
        "name: competitor\ndescription: mentions a competitor\n"
        "patterns:\n  - {id: rival, regex: '\\bglobex\\b', weight: 0.9}\n",
    )
    proc = run_decide(
        "--model", "rules", "--packs", str(packs), "-d", "competitor", stdin="Globex is cheaper\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"]["competitor"] >= 0.9


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "rules", "-d", "nosuch"], "'nosuch'"),
        (["--model", "llm:local/smollm2-135m", "-d", "rude"], "NAME=PROMPT"),
        (["--model", "bogus", "-d", "abusive"], "--model"),
        (["--model", "openai/gpt-6-luna-decisions", "-d", "abusive"], "OPENAI_API_KEY"),
    ],
    ids=["unknown-pack", "needs-prompt", "unknown-model", "no-credentials"],
)
def test_decide_bad_arguments_exit_2(args: list[str], needle: str) -> None:
    env_key = os.environ.pop("OPENAI_API_KEY", None)
    try:
        proc = run_decide(*args, stdin="hello\n")
    finally:
        if env_key is not None:
            os.environ["OPENAI_API_KEY"] = env_key
    assert proc.returncode == 2, proc.stderr
    assert needle in one_line(proc.stderr) and proc.stdout == ""


# -- models ------------------------------------------------------------------


def test_models_json_has_a_list_of_entries_per_kind() -> None:
    proc = run_cli("models", "--json")
    assert proc.returncode == 0, proc.stderr
    models = json.loads(proc.stdout)
    assert set(models) == {"stt", "llm", "tts", "vad", "decision"}
    for entries in models.values():
        assert entries and all(isinstance(e["model"], str) and e["model"] for e in entries)


# -- replays through the local LLM (text-only) --------------------------------


def json_lines(stdout: str) -> list[dict]:
    lines = stdout.splitlines()
    assert lines and all(line.strip() for line in lines), stdout
    return [json.loads(line) for line in lines]


@pytest.mark.integration
def test_text_only_replay_prints_one_result_per_call_in_spec_order() -> None:
    proc = run_cli(
        "replay",
        "tests/calls/outbound-busy.call.yaml",
        "tests/calls/human-conversation-hangup.call.yaml",
        "--text-only",
        "--json",
        "--speed",
        "max",
        timeout=110,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json_lines(proc.stdout)
    assert [r["name"] for r in results] == ["outbound-busy", "human-conversation-hangup"]
    for r in results:
        assert list(r) == RESULT_KEYS
        assert r["ok"] is True and r["failures"] == []
        duration = r["duration"]
        for turn in r["turns"]:
            assert 0 <= turn["start"] <= turn["end"] <= duration, turn
        if r["agent_first_audio_at"] is not None:
            assert 0 <= r["agent_first_audio_at"] <= duration

    busy, human = results
    assert busy["amd"] is None
    assert busy["disposition"] == "busy"
    assert busy["turns"] == []
    assert human["disposition"] == "completed"
    assert {t["role"] for t in human["turns"]} == {"callee", "agent"}
    first = dict(human["turns"][0])
    latency = first.pop("latency")  # the agent answered "Hello?": its latency breakdown
    assert first == {"role": "callee", "start": 0.5, "end": 0.89, "text": "Hello?"}
    assert latency["clock"] == "virtual" and latency["milestones"]["audio_end"] == 0.89
    assert sum(latency["stages"].values()) == pytest.approx(latency["total"], abs=0.01)


HUMAN_EXPECTING_VOICEMAIL = """\
name: human-expecting-voicemail
description: A person answers and hangs up after the agent's first reply; expect is wrong
direction: outbound
answer:
  after: 1.0
callee:
  - at: 0.5
    say: "Hello?"
  - after: agent_turn
    gap: 0.5
    timeout: 10
    hangup: true
expect:
  disposition: voicemail
max_seconds: 30
"""


@pytest.mark.integration
def test_unmet_expect_exits_1_and_names_the_key(tmp_path: Path) -> None:
    call = write(tmp_path / "human-expecting-voicemail.call.yaml", HUMAN_EXPECTING_VOICEMAIL)
    proc = run_cli("replay", call, "--text-only", "--json", "--speed", "max", timeout=110)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (result,) = json_lines(proc.stdout)
    assert result["ok"] is False
    assert result["disposition"] != "voicemail"
    assert result["failures"] == [
        {"key": "disposition", "expected": "voicemail", "actual": result["disposition"]}
    ]
