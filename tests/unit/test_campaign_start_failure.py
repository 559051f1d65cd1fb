"""``campaign start`` whose run fails: one error line and status 1, not a traceback.

Regression: a :class:`DialerError` (a helper or call of the run failed) escaped
``run_start`` and the command ended with Python's traceback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.app.cli.main import app
from agent.campaigns.dialer import Dialer
from agent.campaigns.store import CampaignStore
from tests.unit.test_campaign_dialer import MONDAY_NOON, people, spec

pytestmark = pytest.mark.timeout(60)


async def _create(url: str, n: int) -> None:
    store = await CampaignStore.open(url, create=True)
    try:
        await store.create_campaign(
            "broken", spec(max_concurrent=2).to_json(), people(n), source={}, now=MONDAY_NOON
        )
    finally:
        await store.aclose()


def test_a_failed_run_is_one_error_line_with_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    asyncio.run(_create(url, 4))

    async def broken_heartbeat(self: Dialer) -> None:
        await asyncio.sleep(1.0)
        raise RuntimeError("heartbeat bug")

    monkeypatch.setattr(Dialer, "_renew_leases", broken_heartbeat)
    result = CliRunner().invoke(
        app,
        ["campaign", "start", "broken", "--simulate", "instant", "--sim-seconds", "30"]
        + ["--db", url],
    )

    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    # the progress lines, then one error line: what failed and how to go on
    *progress, last = result.stderr.strip().splitlines()
    assert all(line.startswith("[") for line in progress), result.stderr
    assert last.startswith("error: campaign broken: dialing stopped: RuntimeError: heartbeat bug")
    assert last.endswith("`campaign start broken` resumes it")
    assert "Traceback" not in result.output
