"""The command line explains itself (issue 17, CLI polish).

``-h`` on every command and group, ``--version``, usage lines with argument
names (``PATHS...``, not ``{paths}...``), flags without ``<bool>``, one error
line for usage mistakes (no Click box), failed expectations as expected vs got,
and folders that say their subfolders are not searched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agent.app.cli.main import app
from agent.app.cli.replay import _failure_lines
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.results import CallResult, Failure
from agent.replay.runner import ReplayedCall

ROOT = Path(__file__).resolve().parents[2]


def _command_paths() -> list[list[str]]:
    paths: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "COLUMNS": "100"},
    )


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "callrt")
def test_every_command_takes_h_and_shows_names_not_types_of_flags(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage and "<" not in usage, usage
    assert "<bool>" not in result.stdout


def test_the_top_level_help_names_every_command_group() -> None:
    result = CliRunner().invoke(app, ["-h"], env={"COLUMNS": "200"})
    text = " ".join(result.stdout.split())
    for name in ("replay", "demo", "chat", "decide", "models", "campaign", "guardian", "worker"):
        assert f" {name}" in text


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("callrt ")


def test_a_missing_option_is_one_error_line_not_a_box() -> None:
    proc = _cli("guardian", "list")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and "--url" in lines[0]
    assert "\u256d" not in proc.stderr  # the box's corner


def test_a_failed_expectation_prints_expected_and_got() -> None:
    result = CallResult(
        name="outbound-busy",
        ok=False,
        disposition="completed",
        duration=3.0,
        failures=[Failure(key="disposition", expected="busy", actual="completed")],
    )
    lines = _failure_lines([ReplayedCall(result=result, latencies=[], wall_seconds=1.0)])
    assert lines == ["FAIL outbound-busy: disposition: expected busy, got completed"]


def test_a_folder_with_calls_only_in_subfolders_says_they_are_not_searched(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.call.yaml").write_text("name: x\n", encoding="utf-8")
    with pytest.raises(RecordedCallError, match="subfolders are not searched"):
        load_paths([tmp_path])


def test_the_campaign_eta_on_simulated_time_says_which_clock_it_is() -> None:
    from io import StringIO
    from types import SimpleNamespace

    from rich.console import Console

    from agent.campaigns.progress import LiveProgress

    summary: Any = SimpleNamespace(total_contacts=4, contacts={"done": 0}, status="running")
    out = Console(file=StringIO())
    simulated = LiveProgress(summary, out, simulated=True).line()
    assert "eta" in simulated and "simulated time" in simulated
    assert "simulated" not in LiveProgress(summary, out).line()
