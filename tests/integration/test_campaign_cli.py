"""``python -m agent campaign ...`` as an operator runs it, in subprocesses.

Bad input exits 2 with one line naming the file, line, column and key (or the
option) and creates nothing; a campaign runs to the end, honours the do-not-call
lists, pauses, resumes and cancels from another process, and reports. Most runs
use ``--simulate instant`` (no models); one runs the default simulator with the
real local models. The numbers are fictional: +1 555 010 xxxx (zone from the
campaign's ``timezone``), +1 212 555 01xx (New York), +44 20 7946 0xxx (London).
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.campaigns.report import CSV_HEADER
from tests.integration.test_cli import ROOT, cli_env, one_line, run_cli, write

pytestmark = pytest.mark.integration

ALWAYS_OPEN = 'windows:\n  - {days: daily, start: "00:00", end: "24:00"}\n'
#: every outcome retries after an hour (so a call that ends leaves its contact pending)
RETRY_EVERYTHING = (
    "retry:\n  max_attempts: 3\n  after: {completed: 1h, voicemail: 1h, voicemail-left: 1h,"
    " unavailable: 1h, rejected: 1h, transferred: 1h}\n"
)


def fictional(count: int, start: int = 1000) -> list[str]:
    """``count`` fictional +1 555 010 xxxx numbers (no zone of their own)."""
    return [f"+1555010{start + i}" for i in range(count)]


def campaign_yaml(
    folder: Path, *, concurrent: int = 2, per_second: float = 50, retry: str = "", extra: str = ""
) -> Path:
    text = (
        "timezone: America/New_York\n"
        + ALWAYS_OPEN
        + f"pacing: {{max_concurrent: {concurrent}, max_per_second: {per_second}}}\n"
        + (retry or "retry: {max_attempts: 1}\n")
        + extra
    )
    return write(folder / "campaign.yaml", text)


def contacts_csv(folder: Path, numbers: list[str], name: str = "contacts.csv") -> Path:
    rows = "".join(f'"{n}",person{i}\n' for i, n in enumerate(numbers))
    return write(folder / name, "number,first_name\n" + rows)


def campaign(*args: str | Path, db: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli("campaign", *args, "--db", db, timeout=timeout)


def create(tmp_path: Path, db: str, name: str, numbers: list[str], **yaml: Any) -> None:
    config = campaign_yaml(tmp_path, **yaml)
    proc = campaign(
        "create", name, "--config", config, "--contacts", contacts_csv(tmp_path, numbers), db=db
    )
    assert proc.returncode == 0, proc.stderr


def status(name: str, db: str) -> dict[str, Any]:
    proc = campaign("status", name, "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def report_rows(name: str, db: str, out: Path) -> list[dict[str, str]]:
    proc = campaign("report", name, "--out", out, db=db)
    assert proc.returncode == 0, proc.stderr
    with (out / "attempts.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def listed(db: str) -> str:
    proc = campaign("list", db=db)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def wait_for(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def background() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts ``campaign start ...`` in the background; kills what is still running at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(name: str, db: str, *options: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "campaign", "start", name, "--db", db, *options],
            cwd=ROOT,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'c.db'}"


# -- bad input creates nothing ---------------------------------------------------------

GOOD_YAML = "timezone: America/New_York\n"
GOOD_CSV = "number,first_name\n+15550100101,Ada\n+15550100102,Bo\n+15550100103,Cy\n"
BAD_CASES: dict[str, tuple[str, str | None, str, list[str]]] = {
    # case: (campaign YAML, contacts CSV (None: no file), NAME, what the message must say)
    "bad-number-row-4-col-2": (
        GOOD_YAML,
        "first_name,number\nAda,+15550100101\nBo,+15550100102\nCy,555-not-a-number\n",
        "spring",
        ["{csv}:4:2: number:", "555-not-a-number"],
    ),
    "unknown-yaml-key": (
        GOOD_YAML + "pacing:\n  max_concurent: 2\n",
        GOOD_CSV,
        "spring",
        ["{yaml}:3:3: pacing.max_concurent:", "unknown key", "max_concurrent"],
    ),
    "bad-window-time": (
        GOOD_YAML + 'windows:\n  - days: mon-fri\n    start: "25:00"\n    end: "20:00"\n',
        GOOD_CSV,
        "spring",
        ["{yaml}:4:12: windows[0].start:", "25:00"],
    ),
    "retry-key-not-a-disposition": (
        GOOD_YAML + "retry:\n  after:\n    sometimes: 10m\n",
        GOOD_CSV,
        "spring",
        ["{yaml}:4:5: retry.after.sometimes:", "busy"],
    ),
    "missing-contacts-file": (GOOD_YAML, None, "spring", ["{csv}:", "not found"]),
    "bad-name": (GOOD_YAML, GOOD_CSV, "spring/2025", ["NAME:", "spring/2025"]),
}


@pytest.mark.parametrize("case", list(BAD_CASES), ids=list(BAD_CASES))
def test_bad_create_input_exits_2_with_one_line_and_creates_nothing(
    tmp_path: Path, sqlite_db: str, case: str
) -> None:
    yaml_text, csv_text, name, needles = BAD_CASES[case]
    config = write(tmp_path / "spring.yaml", yaml_text)
    contacts = tmp_path / "spring.csv"
    if csv_text is not None:
        write(contacts, csv_text)
    proc = campaign("create", name, "--config", config, "--contacts", contacts, db=sqlite_db)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    for needle in needles:
        assert needle.format(csv=contacts, yaml=config) in message
    assert "created" not in proc.stdout
    assert not (tmp_path / "c.db").exists()


def test_unsupported_db_scheme_exits_2_naming_db(tmp_path: Path) -> None:
    config, contacts = write(tmp_path / "c.yaml", GOOD_YAML), write(tmp_path / "c.csv", GOOD_CSV)
    for args in (["create", "spring", "--config", config, "--contacts", contacts], ["list"]):
        proc = run_cli("campaign", *args, "--db", "mysql://user:pw@localhost/calls")
        assert proc.returncode == 2, proc.stderr
        message = one_line(proc.stderr)
        assert "--db" in message and "mysql://" in message
        assert proc.stdout == ""


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--simulate", "{tmp}/no-such-folder"], "--simulate"),
        (["--sim-seconds", "-1"], "--sim-seconds"),
    ],
    ids=["missing-simulate-folder", "negative-sim-seconds"],
)
def test_bad_start_option_exits_2_and_dials_nothing(
    tmp_path: Path, sqlite_db: str, options: list[str], needle: str
) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(3))
    args = [o.format(tmp=tmp_path) for o in options]
    if "--simulate" not in args:
        args += ["--simulate", "instant"]
    proc = campaign("start", "spring", *args, db=sqlite_db)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert needle in message and args[1] in message
    after = status("spring", sqlite_db)
    assert (after["status"], after["attempts"], after["contacts"]["pending"]) == ("ready", 0, 3)


def test_creating_the_same_name_twice_exits_2_and_keeps_the_first(
    tmp_path: Path, sqlite_db: str
) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(3))
    other = contacts_csv(tmp_path, fictional(5, start=2000), name="other.csv")
    proc = campaign(
        "create",
        "spring",
        "--config",
        tmp_path / "campaign.yaml",
        "--contacts",
        other,
        db=sqlite_db,
    )
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "NAME:" in message and "'spring'" in message and "--db" not in message
    assert [line.split("\t")[:2] for line in listed(sqlite_db).splitlines()] == [
        ["spring", "ready"]
    ]
    assert status("spring", sqlite_db)["contacts"]["total"] == 3


# -- contacts --------------------------------------------------------------------------


def test_duplicate_numbers_are_merged_with_a_warning_naming_lines_not_numbers(
    tmp_path: Path, sqlite_db: str
) -> None:
    config = campaign_yaml(tmp_path)
    contacts = write(
        tmp_path / "dup.csv",
        "number,first_name\n+15550100101,Ada\n+15550100102,Bo\n"
        '"+1 (555) 010-0101",Ada again\n+15550100102,Bo again\n',
    )
    proc = campaign("create", "dup", "--config", config, "--contacts", contacts, db=sqlite_db)
    assert proc.returncode == 0, proc.stderr
    assert "2 contacts" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2, proc.stderr
    assert f"{contacts}:4:" in warnings[0] and "line 2" in warnings[0]
    assert f"{contacts}:5:" in warnings[1] and "line 3" in warnings[1]
    for digits in ("5550100101", "5550100102", "(555) 010-0101", "010-0101", "010-0102"):
        assert digits not in proc.stderr
    assert status("dup", sqlite_db)["contacts"]["total"] == 2


# -- a whole run -----------------------------------------------------------------------

MIXED = ["+1 212 555 0101", "+44 20 7946 0101", "+15550100101", "+15550100102", "+12125550102"]
MIXED_E164 = ["+12125550101", "+442079460101", "+15550100101", "+15550100102", "+12125550102"]


def test_create_then_start_runs_to_done_without_printing_numbers(
    tmp_path: Path, db_url: str
) -> None:
    # default retries: on simulated time a 4 h voicemail retry passes at once
    create(tmp_path, db_url, "spring", [*MIXED, "+1 (212) 555-0101"], retry="retry: {}\n")
    proc = campaign("start", "spring", "--simulate", "instant", db=db_url)
    assert proc.returncode == 0, proc.stderr
    summary = status("spring", db_url)
    assert summary["status"] == "done"
    assert summary["contacts"]["total"] == len(MIXED_E164)
    assert summary["contacts"].get("pending", 0) == 0
    assert summary["contacts"].get("dialing", 0) == 0
    assert sum(summary["results"].values()) == summary["contacts"]["total"]
    assert summary["attempts"] >= summary["contacts"]["total"]
    assert summary["in_flight"] == 0
    printed = proc.stdout + proc.stderr
    for number in [*MIXED, *MIXED_E164]:
        assert number not in printed
    for number in MIXED_E164:
        assert number[-10:] not in printed.replace(" ", "")


# -- do-not-call -----------------------------------------------------------------------


def test_campaign_and_global_dnc_numbers_are_never_dialled(tmp_path: Path, db_url: str) -> None:
    numbers = ["+15550100101", "+15550100199", "+12125550123", "+19005550100", "+442079460101"]
    create(tmp_path, db_url, "spring", numbers, extra='dnc: {numbers: ["+15550100199"]}\n')
    for value in ("12345", "+1x*", "not-a-number"):
        bad = campaign("dnc", "add", value, db=db_url)
        assert bad.returncode == 2, bad.stderr
        assert "VALUE" in one_line(bad.stderr) and value in one_line(bad.stderr)
    for value in ("+1 212 555 0123", "+1900*"):
        added = campaign("dnc", "add", value, db=db_url)
        assert added.returncode == 0, added.stderr
        assert "added to the global" in added.stdout
    shown = campaign("dnc", "list", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert set(shown.stdout.split()) == {"+12125550123", "+1900*"}
    own = campaign("dnc", "list", "--campaign", "spring", db=db_url)
    assert own.stdout.split() == ["+15550100199"]

    proc = campaign("start", "spring", "--simulate", "instant", db=db_url)
    assert proc.returncode == 0, proc.stderr
    summary = status("spring", db_url)
    assert summary["status"] == "done"
    assert summary["results"].get("dnc") == 3
    dialled = {row["number"] for row in report_rows("spring", db_url, tmp_path / "report")}
    assert dialled == {"+15550100101", "+442079460101"}


# -- pause, resume, cancel from another process ----------------------------------------


def test_pause_before_start_holds_every_call_until_resume(
    tmp_path: Path, sqlite_db: str, background: Callable[..., subprocess.Popen[str]]
) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(4))
    paused = campaign("pause", "spring", db=sqlite_db)
    assert paused.returncode == 0, paused.stderr
    assert "ready -> paused" in paused.stdout
    proc = background(
        "spring", sqlite_db, "--simulate", "instant", "--real-clock", "--sim-seconds", "0.05"
    )
    # a `status` loads what `start` loads, so once it has answered the dialer is up too;
    # unpaused, 4 calls of 0.05 s would be over two seconds later
    for _ in range(2):
        held = status("spring", sqlite_db)
        assert (held["status"], held["attempts"], held["contacts"]["pending"]) == ("paused", 0, 4)
        time.sleep(2)
    assert proc.poll() is None, proc.communicate()
    resumed = campaign("resume", "spring", db=sqlite_db)
    assert resumed.returncode == 0, resumed.stderr
    assert "paused -> running" in resumed.stdout
    again = campaign("resume", "spring", db=sqlite_db)
    assert again.returncode == 2 and "spring" in one_line(again.stderr)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    done = status("spring", sqlite_db)
    assert (done["status"], done["attempts"]) == ("done", 4)
    late = campaign("pause", "spring", db=sqlite_db)
    assert late.returncode == 2 and "done" in one_line(late.stderr)
    assert status("spring", sqlite_db)["status"] == "done"


def test_resume_of_a_ready_campaign_exits_2(tmp_path: Path, sqlite_db: str) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(2))
    proc = campaign("resume", "spring", db=sqlite_db)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "'spring'" in message and "ready" in message and "cannot resume" in message
    assert status("spring", sqlite_db)["status"] == "ready"


def test_cancel_during_a_run_stops_dialling_and_cancels_the_rest(
    tmp_path: Path, db_url: str, background: Callable[..., subprocess.Popen[str]]
) -> None:
    # 30 calls of 0.5 s one at a time: 15 s, time enough for a slow `cancel` to land
    create(tmp_path, db_url, "spring", fictional(30), concurrent=1)
    proc = background(
        "spring", db_url, "--simulate", "instant", "--real-clock", "--sim-seconds", "0.5"
    )
    wait_for(lambda: status("spring", db_url)["attempts"] >= 1, timeout=30, what="a dial")
    cancelled = campaign("cancel", "spring", db=db_url)
    cancelled_at = datetime.now(UTC)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "running -> cancelled" in cancelled.stdout
    at_cancel = status("spring", db_url)["attempts"]
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    summary = status("spring", db_url)
    assert summary["status"] == "cancelled"
    assert summary["attempts"] == at_cancel
    assert summary["contacts"].get("pending", 0) == 0
    assert summary["contacts"].get("dialing", 0) == 0
    rows = report_rows("spring", db_url, tmp_path / "report")
    assert len(rows) == at_cancel
    assert all(datetime.fromisoformat(row["started_at"]) <= cancelled_at for row in rows)
    attempted = {row["contact_line"] for row in rows}
    assert summary["results"].get("cancelled") == 30 - len(attempted) > 0
    assert sum(summary["results"].values()) == 30


def test_cancel_with_calls_in_flight_leaves_nothing_pending(
    tmp_path: Path, sqlite_db: str, background: Callable[..., subprocess.Popen[str]]
) -> None:
    # every outcome retries: the 3 calls in flight at the cancel each schedule a retry
    # after the dialer has seen the cancel; those contacts must end cancelled too
    create(tmp_path, sqlite_db, "spring", fictional(6), concurrent=3, retry=RETRY_EVERYTHING)
    proc = background(
        "spring", sqlite_db, "--simulate", "instant", "--real-clock", "--sim-seconds", "10"
    )
    wait_for(lambda: status("spring", sqlite_db)["in_flight"] == 3, timeout=30, what="3 in flight")
    cancelled = campaign("cancel", "spring", db=sqlite_db)
    assert "running -> cancelled" in cancelled.stdout, cancelled.stderr
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    summary = status("spring", sqlite_db)
    assert (summary["status"], summary["attempts"]) == ("cancelled", 3)
    assert summary["contacts"].get("pending", 0) == 0, summary
    assert sum(summary["results"].values()) == 6, summary


def test_ctrl_c_says_it_is_stopping_and_exits_0(
    tmp_path: Path, sqlite_db: str, background: Callable[..., subprocess.Popen[str]]
) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(4), concurrent=1)
    proc = background(
        "spring", sqlite_db, "--simulate", "instant", "--real-clock", "--sim-seconds", "2"
    )
    wait_for(lambda: status("spring", sqlite_db)["attempts"] >= 1, timeout=30, what="a dial")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "resumes it" in err
    assert "stopping" in err


# -- report ----------------------------------------------------------------------------


def test_report_writes_one_csv_row_per_attempt_and_a_self_contained_page(
    tmp_path: Path, sqlite_db: str
) -> None:
    create(tmp_path, sqlite_db, "spring", MIXED, retry="retry: {}\n")
    assert campaign("start", "spring", "--simulate", "instant", db=sqlite_db).returncode == 0
    out = tmp_path / "report"
    proc = campaign("report", "spring", "--out", out, db=sqlite_db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out / "attempts.csv"), str(out / "report.html")]
    with (out / "attempts.csv").open(newline="", encoding="utf-8") as fh:
        header, *rows = list(csv.reader(fh))
    assert header == CSV_HEADER
    assert len(rows) == status("spring", sqlite_db)["attempts"] > len(MIXED)
    records = [dict(zip(header, row, strict=True)) for row in rows]
    assert {r["number"] for r in records} == set(MIXED_E164)  # whole numbers, not masked
    assert len({r["attempt_id"] for r in records}) == len(records)
    for r in records:
        assert (
            r["attempt_id"].isdigit() and r["attempt_no"].isdigit() and r["contact_line"].isdigit()
        )
        assert r["status"] == "done" and r["disposition"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 3
    assert "http://" not in page and "https://" not in page
    for number in MIXED_E164:
        assert number not in page


def test_report_out_pointing_at_a_file_exits_2(tmp_path: Path, sqlite_db: str) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(2))
    target = write(tmp_path / "not-a-folder", "keep me\n")
    proc = campaign("report", "spring", "--out", target, db=sqlite_db)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "--out" in message and str(target) in message
    assert target.read_text() == "keep me\n"


# -- start on unknown and finished campaigns -------------------------------------------


def test_start_of_an_unknown_campaign_exits_2_naming_it(tmp_path: Path, sqlite_db: str) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(1))  # the store exists; autumn does not
    proc = campaign("start", "autumn", "--simulate", "instant", db=sqlite_db)
    assert proc.returncode == 2, proc.stderr
    message = one_line(proc.stderr)
    assert "'autumn'" in message and "--db" not in message  # the NAME is at fault


def test_start_of_a_done_campaign_exits_0_saying_so(tmp_path: Path, sqlite_db: str) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(2))
    first = campaign("start", "spring", "--simulate", "instant", db=sqlite_db)
    assert first.returncode == 0, first.stderr
    before = status("spring", sqlite_db)
    proc = campaign("start", "spring", "--simulate", "instant", db=sqlite_db)
    assert proc.returncode == 0, proc.stderr
    assert "spring is done" in proc.stdout + proc.stderr
    assert status("spring", sqlite_db)["attempts"] == before["attempts"]


def test_the_last_progress_line_says_done(tmp_path: Path, sqlite_db: str) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(2))
    proc = campaign("start", "spring", "--simulate", "instant", db=sqlite_db)
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[done] contacts 2/2 done"), proc.stderr


# -- the store from the environment ----------------------------------------------------


def test_callrt_db_url_selects_the_store(tmp_path: Path) -> None:
    store = tmp_path / "from-env.db"
    env = {**cli_env(), "CALLRT_DB_URL": f"sqlite:///{store}"}
    config, contacts = campaign_yaml(tmp_path), contacts_csv(tmp_path, fictional(2))
    made = run_cli(
        "campaign", "create", "spring", "--config", config, "--contacts", contacts, env=env
    )
    assert made.returncode == 0, made.stderr
    assert store.is_file()
    shown = run_cli("campaign", "status", "spring", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["contacts"]["total"] == 2
    elsewhere = run_cli(
        "campaign", "status", "spring", "--db", f"sqlite:///{tmp_path / 'other.db'}", env=env
    )
    assert elsewhere.returncode == 2  # --db wins over the environment, and that store is empty


# -- the default simulator: recorded calls through the real local models ---------------


def test_default_simulator_runs_each_contact_as_a_recorded_call(
    tmp_path: Path, sqlite_db: str
) -> None:
    create(tmp_path, sqlite_db, "spring", fictional(3), concurrent=3)
    out = tmp_path / "calls-out"
    proc = campaign("start", "spring", "--out", out, db=sqlite_db, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert status("spring", sqlite_db)["status"] == "done"
    rows = report_rows("spring", sqlite_db, tmp_path / "report")
    assert len(rows) == 3
    for row in rows:
        transcript = Path(row["transcript_path"])
        assert transcript.is_file() and transcript.resolve().is_relative_to(out.resolve()), row
        call = json.loads(transcript.read_text(encoding="utf-8"))
        assert call["disposition"] == row["disposition"]
        assert call["turns"], call
