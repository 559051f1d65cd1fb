"""A dialer run owns its helpers and calls: a failure stops all of them and loses no row.

Regression for the heartbeat and recorder that were bare tasks: a heartbeat that
died left the recorder and the calls in flight running, unreported. Real store
(SQLite, and PostgreSQL when configured), scripted dispatcher, virtual clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.campaigns.dialer import CampaignClock, Dialer, DialerError
from agent.campaigns.records import AttemptRecord
from agent.campaigns.store import CampaignStore, StoreError
from agent.core import clock
from tests.unit.test_campaign_dialer import MONDAY_NOON, ScriptedDispatcher, people, spec

pytestmark = pytest.mark.timeout(60)


async def _dial(
    db_url: str,
    fake: ScriptedDispatcher,
    n: int,
    *,
    patch: Any = None,
    store_patience: float = 60.0,
) -> tuple[str | BaseException, list[AttemptRecord], list[str]]:
    """Run one dialer over ``n`` contacts: its status (or error), the attempts, tasks left."""
    store = await CampaignStore.open(db_url)
    try:
        contacts = people(n)
        campaign = spec(max_concurrent=2)
        cid = await store.create_campaign(
            "faults", campaign.to_json(), contacts, source={}, now=MONDAY_NOON
        )
        row = await store.campaign("faults")
        fake.clock, fake.store = CampaignClock(simulated=True, start=MONDAY_NOON), store
        dialer = Dialer(
            store, row, campaign, fake, fake.clock, dialer_id="d1", store_patience=store_patience
        )
        if patch is not None:
            patch(dialer, store)
        outcome: str | BaseException
        try:
            outcome = await dialer.run()
        except Exception as exc:
            outcome = exc
        await asyncio.sleep(0)
        left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return outcome, await store.attempt_records(cid), left
    finally:
        await store.aclose()


def test_a_failing_heartbeat_stops_the_run_cuts_the_calls_and_records_what_ended(
    db_url: str,
) -> None:
    fake = ScriptedDispatcher(lengths={"+15550100000": 0.5}, length=100.0)

    def broken_heartbeat(dialer: Dialer, _store: CampaignStore) -> None:
        async def renew() -> None:
            await asyncio.sleep(2.0)
            raise RuntimeError("heartbeat bug")

        dialer._renew_leases = renew  # type: ignore[method-assign]

    outcome, records, left = clock.run(_dial(db_url, fake, 3, patch=broken_heartbeat))

    assert isinstance(outcome, DialerError)
    assert "RuntimeError: heartbeat bug" in str(outcome)
    assert left == []  # no helper, call or recorder left running
    by_number = {r.contact_line: r for r in records}
    first, second = by_number[2], by_number[3]
    assert (first.status, first.disposition) == ("done", "completed")  # ended: recorded
    # cut mid-call: truly abandoned, left to its lease (never marked done or redialled here)
    assert second.status == "dialing" and second.disposition is None
    cut = [d for d in fake.dials if d.request.contact_line == 3]
    assert cut and cut[0].t_out is not None and cut[0].t_out < 100.0


def test_an_ended_call_whose_record_is_pending_when_the_run_fails_is_still_recorded(
    db_url: str,
) -> None:
    fake = ScriptedDispatcher(length=1.0)

    def slow_recorder_then_fail(dialer: Dialer, store: CampaignStore) -> None:
        real = store.finish_attempts
        gate = asyncio.Event()

        async def finish(*args: Any, **kw: Any) -> None:
            await gate.wait()  # the recorder holds the batch when the run fails
            await real(*args, **kw)

        async def renew() -> None:
            await asyncio.sleep(3.0)
            raise RuntimeError("heartbeat bug")

        store.finish_attempts = finish  # type: ignore[method-assign]
        dialer._renew_leases = renew  # type: ignore[method-assign]
        # once the run has failed, the store answers again
        original_leftovers = dialer._record_leftovers

        async def leftovers() -> None:
            store.finish_attempts = real  # type: ignore[method-assign]
            await original_leftovers()

        dialer._record_leftovers = leftovers  # type: ignore[method-assign]

    outcome, records, left = clock.run(_dial(db_url, fake, 2, patch=slow_recorder_then_fail))

    assert isinstance(outcome, DialerError)
    assert left == []
    assert sorted((r.status, r.disposition) for r in records) == [
        ("done", "completed"),
        ("done", "completed"),
    ]


def test_a_store_that_goes_away_mid_run_is_waited_for_and_no_row_is_lost(db_url: str) -> None:
    fake = ScriptedDispatcher(length=1.0)
    calls = {"failed": 0}

    def flaky_store(_dialer: Dialer, store: CampaignStore) -> None:
        for name in ("status", "finish_attempts", "claim_attempts", "outlook"):
            real = getattr(store, name)

            def make(real: Any) -> Any:
                async def call(*args: Any, **kw: Any) -> Any:
                    loop = asyncio.get_running_loop()
                    # from 1.5 s on, the store is away for its next 6 requests (the
                    # dialer waits on the wall clock meanwhile, virtual time stands)
                    if loop.time() >= 1.5 and calls["failed"] < 6:
                        calls["failed"] += 1
                        raise StoreError("connection refused")
                    return await real(*args, **kw)

                return call

            setattr(store, name, make(real))

    outcome, records, left = clock.run(_dial(db_url, fake, 4, patch=flaky_store))

    assert outcome == "done"
    assert calls["failed"] == 6
    assert left == []
    assert len(records) == 4
    assert {(r.status, r.disposition) for r in records} == {("done", "completed")}


def test_a_store_away_longer_than_the_patience_stops_the_run_with_its_error(
    db_url: str,
) -> None:
    fake = ScriptedDispatcher(length=1.0)

    def gone(_dialer: Dialer, store: CampaignStore) -> None:
        async def status(*_a: Any, **_k: Any) -> str:
            raise StoreError("connection refused")

        store.status = status  # type: ignore[method-assign]

    outcome, _records, left = clock.run(_dial(db_url, fake, 2, patch=gone, store_patience=1.0))

    assert isinstance(outcome, StoreError)
    assert left == []
