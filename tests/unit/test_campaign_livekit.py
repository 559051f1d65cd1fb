"""Campaign dialling through LiveKit: the dispatcher, the worker's record, the dialer.

The LiveKit server is the fake Twirp server (real ``livekit.api`` client, real
protobuf requests). A stand-in for the worker process reads each dispatch's
metadata as the worker does (``job_of``) and records the call's outcome in the
campaign store with the worker's own function (``record_campaign_call``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from livekit.api import LiveKitAPI

from agent.app.worker import config_for_job, job_of
from agent.campaigns.definition import CampaignSpec, Contact
from agent.campaigns.dialer import CampaignClock, Dialer
from agent.campaigns.dispatch import LiveKitDispatcher, record_campaign_call
from agent.campaigns.policy import RetryPolicy, Window
from agent.campaigns.store import CampaignStore
from agent.replay.results import AmdResult, CallResult
from agent.telephony.livekit.api import LiveKitSettings, LiveKitTelephony
from tests.fakes.twirp_server import FakeLiveKit

ALWAYS = (Window(days=frozenset(range(7)), start=datetime.min.time(), end=None),)
NUMBERS = ["+15550100001", "+15550100002", "+15550100003"]
OUTCOME = {
    "+15550100001": CallResult(
        name="a", disposition="completed", duration=42.0, amd=AmdResult(category="human")
    ),
    "+15550100002": CallResult(
        name="b",
        disposition="voicemail",
        voicemail_left=True,
        duration=20.0,
        amd=AmdResult(category="machine-vm"),
    ),
    "+15550100003": CallResult(name="c", disposition="busy", duration=0.0),
}


@pytest.fixture
async def lk() -> AsyncIterator[FakeLiveKit]:
    async with FakeLiveKit() as fake:
        yield fake


def _telephony(lk: FakeLiveKit) -> LiveKitTelephony:
    settings = LiveKitSettings(
        url=lk.url,
        api_key=lk.api_key,
        api_secret=lk.api_secret,
        sip_trunk_id="ST_outbound",
        agent_name="callrt-test",
    )
    return LiveKitTelephony(settings, api=LiveKitAPI(lk.url, lk.api_key, lk.api_secret))


async def _worker(lk: FakeLiveKit, db_url: str, seen: list[Any], refused: int = 0) -> None:
    """Plays the worker: each new dispatch's call ends with OUTCOME[number].

    The first ``refused`` dispatches were refused by the server: no worker got them.
    """
    handled = refused
    while True:
        dispatches = lk.messages("CreateDispatch")
        for message in dispatches[handled:]:
            job = job_of(message.metadata)
            assert job is not None and job.attempt_id is not None
            seen.append(job)
            assert await record_campaign_call(
                job.attempt_id, f"call_{job.attempt_id}", OUTCOME[job.number], db_url=db_url
            )
        handled = max(handled, len(dispatches))
        await asyncio.sleep(0.01)


async def _campaign(store: CampaignStore, retry: RetryPolicy, *, concurrent: int = 3) -> Any:
    spec = CampaignSpec(
        timezone="America/New_York",
        windows=ALWAYS,
        max_concurrent=concurrent,
        max_per_second=100.0,
        retry=retry,
        caller_id="+15550100000",
    )
    book = [
        Contact(
            line=i + 2,
            number=n,
            zones=("America/New_York",),
            priority=0,
            variables={"first_name": f"name{i}"},
        )
        for i, n in enumerate(NUMBERS)
    ]
    await store.create_campaign("lk", spec.to_json(), book, source={}, now=datetime.now(UTC))
    return spec, await store.campaign("lk")


async def test_a_livekit_campaign_dispatches_jobs_and_records_the_workers_outcomes(
    lk: FakeLiveKit, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    store = await CampaignStore.open(db_url)
    telephony = _telephony(lk)
    seen: list[Any] = []
    worker = asyncio.create_task(_worker(lk, db_url, seen))
    try:
        spec, row = await _campaign(store, RetryPolicy(max_attempts=1))
        dispatcher = LiveKitDispatcher(telephony, store, agent_config="default", poll=0.02)
        dialer = Dialer(store, row, spec, dispatcher, CampaignClock(), dialer_id="d1", poll=0.05)
        status = await asyncio.wait_for(dialer.run(), timeout=30)
        records = await store.attempt_records(row.id)
    finally:
        worker.cancel()
        await store.aclose()
        await telephony.aclose()
    assert status == "done"
    # every contact was dispatched once, as a DialJob the worker can read
    assert sorted(job.number for job in seen) == NUMBERS
    for job in seen:
        assert job.campaign_id == str(row.id)
        assert job.caller_id == "+15550100000"
        assert job.variables and job.variables["first_name"].startswith("name")
    rooms = {m.room for m in lk.messages("CreateDispatch")}
    assert rooms == {m.name for m in lk.messages("CreateRoom")}
    assert all(m.agent_name == "callrt-test" for m in lk.messages("CreateDispatch"))
    # the worker's outcome is the attempt's, recorded once
    by_number = {r.number: r for r in records}
    assert by_number["+15550100001"].disposition == "completed"
    assert by_number["+15550100001"].amd_category == "human"
    assert by_number["+15550100001"].call_id == f"call_{by_number['+15550100001'].attempt_id}"
    assert by_number["+15550100002"].voicemail_left is True
    assert by_number["+15550100003"].disposition == "busy"
    assert len(records) == 3


async def test_a_refused_dispatch_is_a_failed_attempt_and_is_retried(
    lk: FakeLiveKit, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    store = await CampaignStore.open(db_url)
    telephony = _telephony(lk)
    worker = asyncio.create_task(_worker(lk, db_url, [], refused=1))
    lk.fail_next("CreateDispatch", code="unavailable", msg="no workers")
    try:
        retry = RetryPolicy(max_attempts=2, after={"failed": 0.05, "busy": None})
        # one call at a time: the refused dispatch is the first the server saw
        spec, row = await _campaign(store, retry, concurrent=1)
        dispatcher = LiveKitDispatcher(telephony, store, poll=0.02)
        dialer = Dialer(store, row, spec, dispatcher, CampaignClock(), dialer_id="d1", poll=0.05)
        status = await asyncio.wait_for(dialer.run(), timeout=30)
        records = await store.attempt_records(row.id)
    finally:
        worker.cancel()
        await store.aclose()
        await telephony.aclose()
    assert status == "done"
    failed = [r for r in records if r.disposition == "failed"]
    assert len(failed) == 1 and failed[0].attempt_no == 1
    again = [r for r in records if r.contact_id == failed[0].contact_id and r.attempt_no == 2]
    assert len(again) == 1 and again[0].disposition in {"completed", "voicemail", "busy"}


async def test_a_503_while_placing_a_call_is_a_failed_attempt_retried_and_no_row_is_lost(
    lk: FakeLiveKit, tmp_path: Path
) -> None:
    """The LiveKit API (behind its load balancer) answers 503 to the first room."""
    db_url = f"sqlite:///{tmp_path / 'c.db'}"
    store = await CampaignStore.open(db_url)
    telephony = _telephony(lk)
    worker = asyncio.create_task(_worker(lk, db_url, []))
    lk.unavailable_next("CreateRoom")
    try:
        retry = RetryPolicy(max_attempts=2, after={"failed": 0.05, "busy": None})
        spec, row = await _campaign(store, retry, concurrent=1)
        dispatcher = LiveKitDispatcher(telephony, store, poll=0.02)
        dialer = Dialer(store, row, spec, dispatcher, CampaignClock(), dialer_id="d1", poll=0.05)
        status = await asyncio.wait_for(dialer.run(), timeout=30)
        records = await store.attempt_records(row.id)
    finally:
        worker.cancel()
        await store.aclose()
        await telephony.aclose()
    assert status == "done"
    [failed] = [r for r in records if r.disposition == "failed"]
    assert failed.attempt_no == 1
    again = [r for r in records if r.contact_id == failed.contact_id and r.attempt_no == 2]
    assert len(again) == 1
    # every contact ended, each attempt recorded once
    assert sorted(r.number for r in records if r.attempt_no == 1) == NUMBERS
    assert len(records) == len(NUMBERS) + 1


async def test_a_worker_without_a_store_reports_that_it_could_not_record(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("CALLRT_DB_URL", raising=False)
    done = await record_campaign_call("7", "call_x", OUTCOME["+15550100001"])
    assert done is False
    assert "CALLRT_DB_URL" in caplog.text


def test_the_worker_fills_a_jobs_variables_into_the_agent_config(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text('task: "remind {first_name} of the {thing}"\n', encoding="utf-8")
    metadata = {
        "number": "+15550100001",
        "agent_config": str(agent),
        "attempt_id": "3",
        "variables": {"first_name": "Ada"},
    }
    job = job_of(json.dumps(metadata))
    assert job is not None
    config = config_for_job(job, None)
    assert config.task == "remind Ada of the {thing}"


def test_dispatch_metadata_rejects_variables_that_are_not_strings() -> None:
    with pytest.raises(ValueError, match="variables"):
        job_of('{"number":"+15550100001","variables":{"a":1}}')
