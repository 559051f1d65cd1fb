"""The layers of agent/ hold: import-linter's contracts (pyproject.toml) are all kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout
    # the contracts named in docs/architecture.md are the ones checked
    for name in (
        "core imports nothing else of ours",
        "amd and guardrails depend only on the core",
        "amd and guardrails never import each other",
        "the session never imports the controller",
        "only the app composes",
    ):
        assert name in done.stdout


def test_a_lower_layer_importing_the_app_breaks_a_contract(tmp_path: Path) -> None:
    """The contracts are live: a session module that imports the app is reported."""
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = tmp_path / "project"
    for package in ("agent", "amd", "guardrails", "examples"):
        shutil.copytree(
            ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (project / "pyproject.toml").write_text(config, encoding="utf-8")
    (project / "agent" / "session" / "bad.py").write_text(
        "from agent.app.config import AgentConfig\n", encoding="utf-8"
    )
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode != 0
    assert "agent.session.bad -> agent.app.config" in done.stdout
