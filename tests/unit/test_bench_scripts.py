"""Every bench script starts as a script: bench/amd.py and bench/guardrails.py must not
shadow the packages of the same name (nor break the other scripts' imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .bench_scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]


def _bench(
    tmp_path: Path, script: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """bench/``script`` with ``args``, from another folder, as `make bench` or a user
    would run it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("[a-z]*.py")))
def test_bench_script_runs_as_a_script(script: str, tmp_path: Path) -> None:
    proc = _bench(tmp_path, script, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")


def _stt_bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """bench/stt.py with ``args`` on one recorded call, from another folder."""
    call = ROOT / "tests" / "calls" / "amd" / "human-yeah.call.yaml"
    return _bench(tmp_path, "stt.py", *args, str(call))


def test_stt_bench_refuses_an_unknown_voice_in_one_line(tmp_path: Path) -> None:
    proc = _stt_bench(tmp_path, "--voice", "espeak:zz-nowhere")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: --voice: ") and "zz-nowhere" in line


def test_stt_bench_refuses_a_prompt_outside_whole_mode_in_one_line(tmp_path: Path) -> None:
    proc = _stt_bench(tmp_path, "--prompt", "Press 1.")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --prompt: only with --mode whole"


def _sentences_bench(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    """bench/amd_sentences.py on a list holding ``text``, from another folder."""
    listed = tmp_path / "list.txt"
    listed.write_text(text, encoding="utf-8")
    return _bench(tmp_path, "amd_sentences.py", str(listed), *args, timeout=120)


def test_sentence_bench_refuses_an_unknown_section_in_one_line(tmp_path: Path) -> None:
    proc = _sentences_bench(tmp_path, "[machine-vn]\nLeave a message.\n", "--voices", "piper")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "list.txt:1: section [machine-vn]" in line
    assert "[machine-vm]" in line


def test_sentence_bench_refuses_an_unknown_voice_in_one_line(tmp_path: Path) -> None:
    proc = _sentences_bench(tmp_path, "[human]\nHello?\n", "--voices", "espeak:zz-nowhere")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: --voices: ") and "zz-nowhere" in line


def test_sentence_bench_counts_what_the_decodes_say(tmp_path: Path) -> None:
    text = (
        "[machine-ivr]\nFor sales, press one. For support, press two.\n[human]\nHi, this is Dana.\n"
    )
    proc = _sentences_bench(tmp_path, text, "--voices", "piper", "--show")
    assert proc.returncode == 0, proc.stderr
    [piper] = [line for line in proc.stdout.splitlines() if line.strip().startswith("piper")]
    assert piper.split()[1:5] == ["1/1", "1/1", "0/1", "0/1"]
    # Piper is heard almost word for word
    assert 0.0 <= float(piper.split()[5]) < 0.3


def test_sentence_bench_refuses_an_empty_prompt_in_one_line(tmp_path: Path) -> None:
    proc = _sentences_bench(tmp_path, "[human]\nHello?\n", "--voices", "piper", "--prompt", " ")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: --prompt: ")


def test_sentence_bench_word_error_rate() -> None:
    bench = load_bench_script("amd_sentences.py", "bench_amd_sentences")
    wer = bench.word_error_rate
    assert wer("Press one for sales.", "press one, for sales") == 0.0
    assert wer("Press one for sales.", "Press won for sales.") == 0.25
    assert wer("Press one for sales.", "Press one for all the sales.") == 0.5
    assert wer("Press one.", "") == 1.0
