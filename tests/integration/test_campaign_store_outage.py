"""The campaign store goes away mid-run: a real PostgreSQL server stopped, then restarted.

The test starts a private cluster (``initdb`` in a temporary folder, a free port,
the socket in that folder) and stops it when done. It is skipped when the
PostgreSQL server binaries are not installed (``scripts/postgres.sh`` says how
to get them); as root, the cluster runs as the ``postgres`` user.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.campaigns.dialer import CampaignClock, Dialer
from agent.campaigns.dispatch import DialRequest
from agent.campaigns.store import CampaignStore
from tests.unit.test_campaign_dialer import MONDAY_NOON, ScriptedDispatcher, people, spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _bin_dir() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivateCluster:
    """A throwaway PostgreSQL cluster: ``start()``, ``stop()``, ``url``."""

    def __init__(self, bin_dir: Path, folder: Path) -> None:
        self.bin = bin_dir
        self.data = folder / "data"
        self.folder = folder
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://callrt@127.0.0.1:{self.port}/postgres"
        # initdb refuses to run as root
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip()[-500:]}")

    def init(self) -> None:
        if self._as:
            shutil.chown(self.folder, "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "callrt", "-A", "trust")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        log = str(self.folder / "server.log")
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "stop", "-m", mode)


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not installed (see scripts/postgres.sh)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: initdb cannot run")
    # not under pytest's tmp_path: as root that is private to root, and the server
    # runs as postgres
    folder = Path(tempfile.mkdtemp(prefix="callrt-pg-"))
    try:
        pg = PrivateCluster(bin_dir, folder)
        pg.init()
        pg.start()
        try:
            yield pg
        finally:
            with contextlib.suppress(RuntimeError):  # already stopped
                pg.stop("immediate")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_postgresql_server_stopped_and_restarted_mid_run_loses_no_row(
    cluster: PrivateCluster, caplog: pytest.LogCaptureFixture
) -> None:
    outage: list[asyncio.Task[None]] = []
    down: list[float] = []

    async def server_restart() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(cluster.stop)
        down.append(loop.time())
        await asyncio.sleep(2.0)
        await asyncio.to_thread(cluster.start)
        down.append(loop.time())

    async def on_dial(request: DialRequest) -> None:
        if request.contact_line == 4 and not outage:  # the third contact: mid-run
            outage.append(asyncio.create_task(server_restart()))

    async def main() -> tuple[str, list[str], int, list[str]]:
        store = await CampaignStore.open(cluster.url)
        try:
            campaign = spec(max_concurrent=2)
            cid = await store.create_campaign(
                "outage", campaign.to_json(), people(6), source={}, now=MONDAY_NOON
            )
            row = await store.campaign("outage")
            fake = ScriptedDispatcher(length=0.5, on_dial=on_dial)
            fake.clock = CampaignClock()
            dialer = Dialer(store, row, campaign, fake, fake.clock, dialer_id="d1", poll=0.05)
            status = await asyncio.wait_for(dialer.run(), timeout=60)
            await asyncio.gather(*outage)
            records = await store.attempt_records(cid)
            left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            shown = [f"{r.status}/{r.disposition}" for r in records]
            return status, shown, len(fake.dials), left
        finally:
            await store.aclose()

    with caplog.at_level(logging.WARNING, logger="agent.campaigns"):
        status, records, dials, left = asyncio.run(main())

    assert len(down) == 2  # the server really went away and came back during the run
    assert "campaign store unreachable; waiting for it" in caplog.messages  # and was missed
    assert left == []
    assert status == "done"
    assert records == ["done/completed"] * 6  # every contact, recorded once
    assert dials == 6  # no contact dialled twice
