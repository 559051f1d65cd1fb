"""Threads for local inference: the OpenMP spin setting and the per-token thread choice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent.models.threads import OPENMP_SPIN, DecodeThreads, limit_openmp_spin


def test_the_spin_is_set_when_the_environment_has_no_policy() -> None:
    env: dict[str, str] = {"PATH": "/bin"}
    assert limit_openmp_spin(env) is True
    assert env["GOMP_SPINCOUNT"] == OPENMP_SPIN


@pytest.mark.parametrize("name", ["GOMP_SPINCOUNT", "OMP_WAIT_POLICY"])
def test_an_operators_policy_stands(name: str) -> None:
    env = {name: "passive" if name == "OMP_WAIT_POLICY" else "5"}
    assert limit_openmp_spin(env) is False
    assert env == {name: "passive" if name == "OMP_WAIT_POLICY" else "5"}


def _spin_after_import(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(extra)
    code = "import os, agent.models; print(os.environ.get('GOMP_SPINCOUNT', '-'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_importing_the_models_package_sets_the_spin_before_any_model_loads() -> None:
    assert _spin_after_import({}) == OPENMP_SPIN
    assert _spin_after_import({"GOMP_SPINCOUNT": "77"}) == "77"
    assert _spin_after_import({"OMP_WAIT_POLICY": "active"}) == "-"


def test_each_count_is_measured_before_one_is_preferred() -> None:
    threads = DecodeThreads(2)
    assert threads.choose() == 2
    threads.record(2, 0.010)
    assert threads.choose() == 1
    threads.record(1, 0.014)
    assert threads.preferred() == 2
    assert threads.seconds_per_token() == {2: 0.010, 1: 0.014}


def test_the_faster_count_runs_and_the_other_is_probed_now_and_then() -> None:
    threads = DecodeThreads(2, probe_every=4)
    threads.record(2, 0.010)
    threads.record(1, 0.014)
    picks = []
    for _ in range(12):
        n = threads.choose()
        picks.append(n)
        threads.record(n, 0.010 if n == 2 else 0.014)
    assert picks.count(1) == 3  # one token in four
    assert picks.count(2) == 9


def test_a_loaded_machine_moves_generation_to_one_thread_and_back() -> None:
    threads = DecodeThreads(2, probe_every=4)
    threads.record(2, 0.010)
    threads.record(1, 0.014)
    # another process now competes for the cores: 2 threads get slow, 1 barely moves
    for _ in range(40):
        n = threads.choose()
        threads.record(n, 0.060 if n == 2 else 0.016)
    assert threads.preferred() == 1
    # the other process has finished: the probes of 2 threads see it
    for _ in range(60):
        n = threads.choose()
        threads.record(n, 0.010 if n == 2 else 0.014)
    assert threads.preferred() == 2


def test_one_thread_models_always_use_one() -> None:
    threads = DecodeThreads(1)
    assert {threads.choose() for _ in range(30)} == {1}
    threads.record(3, 0.5)  # a count it never chooses is ignored
    assert threads.seconds_per_token() == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"most": 0}, "most: expected at least 1"),
        ({"most": 2, "probe_every": 1}, "probe_every: expected at least 2"),
        ({"most": 2, "weight": 0.0}, r"weight: expected a number in \(0, 1\]"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecodeThreads(**kwargs)  # type: ignore[arg-type]
