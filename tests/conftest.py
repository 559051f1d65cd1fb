"""Shared fixtures: scripted model sets for text-only replays on the virtual clock."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CALLS = ROOT / "tests" / "calls"
DEMO = ROOT / "configs" / "demo"


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # keep synthesised speech out of the user's cache during tests
    import os

    if "CALLRT_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("CALLRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
