"""Where the campaign store is, and which commands may create one (issue 17).

``sqlite:///tmp/c.db`` (three slashes) is ``./tmp/c.db``; read-only commands used
to create it silently and then report "no campaign named ...". Now only
``create`` and ``dnc add`` make a store, others say "no campaign store at PATH",
a relative path is printed resolved, and ``--help`` names the default file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.app.cli.campaign import campaign_app
from agent.campaigns.location import locate
from agent.campaigns.store import CampaignStore, StoreMissing
from agent.core import clock

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "campaigns"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CALLRT_DB_URL", raising=False)
    return tmp_path


def _campaign(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(campaign_app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_relative_sqlite_path_is_resolved_against_the_working_folder(workdir: Path) -> None:
    location = locate("sqlite:///tmp/ux/c.db")
    assert location.path == workdir / "tmp" / "ux" / "c.db"
    assert location.url == f"sqlite:///{workdir}/tmp/ux/c.db"
    assert location.source == "--db"
    note = location.note()
    assert note is not None and str(location.path) in note and "four slashes" in note
    assert locate(f"sqlite:///{workdir}/c.db").note() is None  # absolute: nothing to say


def test_the_url_comes_from_the_option_then_the_environment_then_the_default(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert locate(None).source == "default"
    assert locate(None).path == workdir / "runs" / "campaigns.db"
    monkeypatch.setenv("CALLRT_DB_URL", "sqlite:///from-env.db")
    assert locate(None).source == "CALLRT_DB_URL"
    assert locate("sqlite:///given.db").source == "--db"


def test_opening_without_create_never_makes_a_file(workdir: Path) -> None:
    with pytest.raises(StoreMissing, match="no campaign store at"):
        clock.run(CampaignStore.open(f"sqlite:///{workdir}/a/b.db", create=False))
    assert not (workdir / "a").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["status", "spring"],
        ["status", "spring", "--json"],
        ["list"],
        ["report", "spring", "--out", "rep"],
        ["pause", "spring"],
        ["resume", "spring"],
        ["cancel", "spring"],
        ["dnc", "list"],
        ["dnc", "remove", "+15550100101"],
        ["start", "spring", "--simulate", "instant"],
    ],
)
def test_read_only_commands_say_there_is_no_store_and_create_nothing(
    workdir: Path, args: list[str]
) -> None:
    code, out, err = _campaign(*args, "--db", "sqlite:///tmp/ux/c.db")
    message = _one_line(err)
    assert code == 2
    assert f"no campaign store at {workdir}/tmp/ux/c.db" in message
    assert "relative to the working folder" in message
    assert "no campaign named" not in message
    assert out == ""
    assert list(workdir.iterdir()) == []


def test_the_default_store_is_not_created_by_list_and_the_message_says_it_is_the_default(
    workdir: Path,
) -> None:
    code, _, err = _campaign("list")
    assert code == 2
    assert f"no campaign store at {workdir}/runs/campaigns.db (the default" in _one_line(err)
    assert not (workdir / "runs").exists()


def test_a_store_named_by_the_environment_is_blamed_on_the_environment(workdir: Path) -> None:
    code, _, err = _campaign("status", "spring", env={"CALLRT_DB_URL": "sqlite:///env.db"})
    assert code == 2
    assert "CALLRT_DB_URL sqlite:///env.db is relative" in _one_line(err)


def test_create_makes_the_store_and_prints_where_it_is(workdir: Path) -> None:
    code, out, err = _campaign(
        "create",
        "spring",
        "--config",
        str(CONFIG / "demo.yaml"),
        "--contacts",
        str(CONFIG / "demo-contacts.csv"),
        "--db",
        "sqlite:///tmp/ux/c.db",
    )
    assert code == 0, err
    assert out.startswith("created campaign spring")
    assert f"[campaign store: {workdir}/tmp/ux/c.db" in _one_line(err)
    assert (workdir / "tmp" / "ux" / "c.db").is_file()
    code, out, err = _campaign("list", "--db", "sqlite:///tmp/ux/c.db")
    assert code == 0 and out.startswith("spring\tready")


def test_help_shows_the_default_store_location(tmp_path: Path) -> None:
    # a fresh process: the help names the file under *its* working folder
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("CALLRT_DB_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "agent", "campaign", "status", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "runs" / "campaigns.db") in _one_line(proc.stdout)
