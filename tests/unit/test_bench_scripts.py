"""Every bench script starts as a script: bench/amd.py and bench/guardrails.py must not
shadow the packages of the same name (nor break the other scripts' imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("[a-z]*.py")))
def test_bench_script_runs_as_a_script(script: str, tmp_path: Path) -> None:
    # from another folder, as `make bench` or a user would run it
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")


def test_stt_bench_refuses_an_unknown_voice_in_one_line(tmp_path: Path) -> None:
    call = ROOT / "tests" / "calls" / "amd" / "human-yeah.call.yaml"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stt.py"), "--voice", "espeak:zz-nowhere", str(call)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: --voice: ") and "zz-nowhere" in line


def test_stt_bench_refuses_a_prompt_outside_whole_mode_in_one_line(tmp_path: Path) -> None:
    call = ROOT / "tests" / "calls" / "amd" / "human-yeah.call.yaml"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stt.py"), "--prompt", "Press 1.", str(call)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --prompt: only with --mode whole"
