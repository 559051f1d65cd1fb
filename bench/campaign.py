"""Campaign dialer throughput: sustained dials per second and store statements per dial.

Runs a whole campaign through the real dialer and store with *instant* simulated
calls (no models, no call time), on simulated campaign time, so the wall clock
measures only the scheduler and the store: the overhead the dialer adds to each
dial. The issue's target is at most 5 ms per dial.

Each run: N contacts, the default retry policy (busy, no-answer, ... retried on
simulated time), no pacing limit, max_concurrent 20 (claims and records are
batched) and then 1 (the worst case: every dial pays its own transactions). Prints the median of the
runs for SQLite (a file) and for PostgreSQL (``CALLRT_TEST_PG_URL``, else the
server ``scripts/postgres.sh`` starts; skipped when there is none).

Usage::

    .venv/bin/python bench/campaign.py [--contacts 500] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)

from agent.campaigns.definition import CampaignSpec, Contact
from agent.campaigns.dialer import CampaignClock, Dialer
from agent.campaigns.dispatch import InstantDispatcher
from agent.campaigns.policy import DncList, RetryPolicy, Window
from agent.campaigns.store import CampaignStore
from agent.core import clock

ROOT = Path(__file__).resolve().parents[1]


def _spec(concurrent: int) -> CampaignSpec:
    return CampaignSpec(
        agent=None,
        caller_id=None,
        timezone="America/New_York",
        windows=(Window(days=frozenset(range(7)), start=datetime.min.time(), end=None),),
        max_concurrent=concurrent,
        max_per_second=100000.0,
        retry=RetryPolicy(max_attempts=3),
        dnc=DncList(),
        priority=0,
        lease_seconds=30.0,
        max_call_seconds=None,
    )


async def _run(url: str, contacts: int, concurrent: int) -> tuple[float, int, int]:
    """One campaign: (wall seconds, dials, statements during the run)."""
    store = await CampaignStore.open(url)
    try:
        spec = _spec(concurrent)
        book = [
            Contact(
                line=i + 2,
                number=f"+1555{i:07d}",
                zones=("America/New_York",),
                priority=0,
                variables={},
            )
            for i in range(contacts)
        ]
        name = f"bench-{uuid.uuid4().hex[:8]}"
        await store.create_campaign(name, spec.to_json(), book, source={}, now=datetime.now(UTC))
        row = await store.campaign(name)
        dialer = Dialer(
            store,
            row,
            spec,
            InstantDispatcher(seed=1),
            CampaignClock(simulated=True),
            dialer_id="bench",
        )
        before = store.statements
        t0 = time.perf_counter()
        status = await dialer.run()
        wall = time.perf_counter() - t0
        assert status == "done", status
        return wall, dialer.dialed, store.statements - before
    finally:
        await store.aclose()


def _pg_url() -> str | None:
    url = os.environ.get("CALLRT_TEST_PG_URL", "").strip()
    if url:
        return url
    try:
        done = subprocess.run(
            [str(ROOT / "scripts" / "postgres.sh")], capture_output=True, text=True, timeout=300
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def bench(name: str, url: str, contacts: int, runs: int, concurrent: int) -> None:
    results = [clock.run(_run(url, contacts, concurrent), virtual=True) for _ in range(runs)]
    per_dial = [wall / dials * 1000 for wall, dials, _ in results]
    rates = [dials / wall for wall, dials, _ in results]
    stmts = [n / dials for _, dials, n in results]
    dials = results[0][1]
    print(
        f"{name:10s} concurrency {concurrent:2d}, {contacts} contacts, {dials} dials/run, "
        f"{runs} runs: "
        f"{statistics.median(rates):7.1f} dials/s, "
        f"{statistics.median(per_dial):.2f} ms scheduler+store per dial, "
        f"{statistics.median(stmts):.1f} statements per dial"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contacts", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    url = _pg_url()
    # 20 lines: claims and records batch; 1 line: every dial pays its own transactions
    for concurrent in (20, 1):
        with tempfile.TemporaryDirectory() as tmp:
            bench("sqlite", f"sqlite:///{tmp}/bench.db", args.contacts, args.runs, concurrent)
        if url is None:
            print("postgresql: skipped (no server: set CALLRT_TEST_PG_URL or run as root)")
        else:
            bench("postgresql", url, args.contacts, args.runs, concurrent)
    asyncio.set_event_loop(None)


if __name__ == "__main__":
    main()
