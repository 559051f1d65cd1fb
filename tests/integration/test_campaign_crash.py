"""Crash safety and several dialers, through the real CLI in subprocesses.

- ``kill -9`` of a dialer in the middle of calls, then a restart: no contact is
  dialled twice for one attempt (the dial log is written, and fsynced, before
  each call is placed) and none is lost (every contact ends done).
- Two dialers on one PostgreSQL campaign never hold the same contact at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from agent.campaigns.store import CampaignStore
from tests.integration.test_cli import ROOT, cli_env

pytestmark = pytest.mark.integration

CAMPAIGN = """\
timezone: America/New_York
windows:
  - days: daily
    start: "00:00"
    end: "24:00"
pacing:
  max_concurrent: {concurrent}
  max_per_second: 50
retry:
  max_attempts: 3
  after: {{busy: 1s, no-answer: 1s, failed: 1s, error: 1s, abandoned: 1s, voicemail: 1s}}
lease_seconds: 5
"""


def _files(tmp_path: Path, contacts: int, concurrent: int) -> tuple[Path, Path]:
    config = tmp_path / "campaign.yaml"
    config.write_text(CAMPAIGN.format(concurrent=concurrent), encoding="utf-8")
    rows = ["number,first_name"] + [f"+1555010{i:04d},c{i}" for i in range(contacts)]
    book = tmp_path / "contacts.csv"
    book.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return config, book


def _cli(*args: str, db: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "campaign", *args, "--db", db],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _start(*args: str, db: str, log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent",
            "campaign",
            "start",
            *args,
            "--db",
            db,
            "--dial-log",
            str(log),
        ],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _dials(log: Path) -> list[tuple[int, int]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        _, contact, attempt = line.split()
        out.append((int(contact), int(attempt)))
    return out


def _wait_for_dials(log: Path, n: int, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(_dials(log)) < n:
        if proc.poll() is not None:
            pytest.fail(f"the dialer exited early ({proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"fewer than {n} dials after {timeout} s")
        time.sleep(0.02)


def _store_state(db: str, name: str) -> tuple[object, list[object]]:
    async def read() -> tuple[object, list[object]]:
        store = await CampaignStore.open(db)
        try:
            row = await store.campaign(name)
            return await store.summary(name), list(await store.attempt_records(row.id))
        finally:
            await store.aclose()

    return asyncio.run(read())


@pytest.mark.parametrize(
    "simulate",
    [
        pytest.param(("--simulate", "instant", "--real-clock", "--sim-seconds", "1.5"), id="wall"),
        pytest.param(("--simulate", "instant", "--sim-seconds", "60"), id="simulated-time"),
    ],
)
def test_kill_9_mid_campaign_then_restart_loses_nothing_and_never_redials_an_attempt(
    tmp_path: Path, db_url: str, simulate: tuple[str, ...]
) -> None:
    # simulated time runs through a campaign fast: give it enough contacts to be killed mid-way
    contacts = 10 if "--real-clock" in simulate else 40
    config, book = _files(tmp_path, contacts=contacts, concurrent=2)
    created = _cli("create", "crash", "--config", str(config), "--contacts", str(book), db=db_url)
    assert created.returncode == 0, created.stderr
    log = tmp_path / "dials.log"
    first = _start("crash", *simulate, db=db_url, log=log)
    if "--real-clock" in simulate:
        _wait_for_dials(log, 4, first)
    else:
        # simulated time runs fast: stop it as soon as it has dialled at all
        _wait_for_dials(log, 1, first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    first.stdout.close()  # type: ignore[union-attr]
    first.stderr.close()  # type: ignore[union-attr]
    before = _dials(log)
    summary, _ = _store_state(db_url, "crash")
    assert summary.status == "running"  # type: ignore[attr-defined]

    second = _start("crash", *simulate, db=db_url, log=log)
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err

    dials = _dials(log)
    assert dials[: len(before)] == before
    # never the same attempt of a contact twice
    assert [k for k, n in Counter(dials).items() if n > 1] == []
    summary, records = _store_state(db_url, "crash")
    assert summary.status == "done"  # type: ignore[attr-defined]
    assert summary.contacts == {"done": contacts}  # type: ignore[attr-defined]
    assert summary.total_contacts == contacts  # type: ignore[attr-defined]
    # every dial placed is an attempt on record, and every attempt on record was dialled
    attempts = {(r.contact_id, r.attempt_no): r for r in records}  # type: ignore[attr-defined]
    assert set(dials) <= set(attempts)
    # an attempt recorded but killed before its dial line: abandoned, never dialled
    for key, record in attempts.items():
        if key not in set(dials):
            assert record.status == "abandoned"  # type: ignore[attr-defined]
    # the kill hit calls in flight: they were abandoned and their contacts went on
    abandoned = [r for r in records if r.status == "abandoned"]  # type: ignore[attr-defined]
    assert abandoned
    for r in abandoned:
        later = [
            a
            for (c, n), a in attempts.items()
            if c == r.contact_id and n > r.attempt_no  # type: ignore[attr-defined]
        ]
        assert later or r.attempt_no == 3  # type: ignore[attr-defined]
    assert all(r.status in ("done", "abandoned") for r in records)  # type: ignore[attr-defined]


def test_two_dialers_on_one_postgresql_campaign_never_dial_a_contact_at_once(
    tmp_path: Path, pg_url: str
) -> None:
    config, book = _files(tmp_path, contacts=40, concurrent=3)
    created = _cli("create", "shared", "--config", str(config), "--contacts", str(book), db=pg_url)
    assert created.returncode == 0, created.stderr
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [
        _start(
            "shared",
            "--simulate",
            "instant",
            "--real-clock",
            "--sim-seconds",
            "0.1",
            "--dialer-id",
            f"dialer-{i}",
            db=pg_url,
            log=log,
        )
        for i, log in enumerate(logs)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    a, b = (_dials(log) for log in logs)
    assert a and b, "both dialers placed calls"
    assert not set(a) & set(b)
    assert [k for k, n in Counter(a + b).items() if n > 1] == []
    summary, records = _store_state(pg_url, "shared")
    assert summary.status == "done"  # type: ignore[attr-defined]
    assert summary.contacts == {"done": 40}  # type: ignore[attr-defined]
    assert {r.dialer for r in records} == {"dialer-0", "dialer-1"}  # type: ignore[attr-defined]
    # one contact's attempts never overlap in time and are numbered 1, 2, ...
    by_contact: dict[int, list[object]] = {}
    for r in records:
        by_contact.setdefault(r.contact_id, []).append(r)  # type: ignore[attr-defined]
    for rows in by_contact.values():
        rows.sort(key=lambda r: r.attempt_no)  # type: ignore[attr-defined]
        assert [r.attempt_no for r in rows] == list(range(1, len(rows) + 1))  # type: ignore[attr-defined]
        for earlier, later in zip(rows, rows[1:], strict=False):
            assert earlier.ended_at <= later.started_at  # type: ignore[attr-defined]
