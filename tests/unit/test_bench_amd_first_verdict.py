"""bench/amd.py counts the machine calls whose first verdict was a person (the agent
began talking to a machine): the first category AMD published, provisional or not."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from agent.core.messages import AmdPrediction

from .bench_scripts import load_bench_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench_script("amd.py", "bench_amd")


def replayed(*messages: object) -> Any:
    return SimpleNamespace(messages=list(messages))


def test_the_first_verdict_skips_waits_and_uncertain(bench: ModuleType) -> None:
    r = replayed(
        AmdPrediction(call_id="c", category="wait", stage="uncertain"),
        AmdPrediction(call_id="c", category="uncertain", stage="uncertain"),
        AmdPrediction(call_id="c", category="human", stage="human", provisional=True),
        AmdPrediction(call_id="c", category="machine-vm", stage="machine-vm"),
    )
    assert bench._first_verdict(r) == "human"


def test_a_machine_heard_as_a_machine_first_is_not_counted(bench: ModuleType) -> None:
    r = replayed(
        AmdPrediction(call_id="c", category="machine-ivr", stage="machine-ivr"),
        AmdPrediction(call_id="c", category="human", stage="human"),
    )
    assert bench._first_verdict(r) == "machine-ivr"
    assert bench._first_verdict(replayed()) is None
