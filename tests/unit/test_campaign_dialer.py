"""The campaign dialer end to end: a real store, a scripted dispatcher, a virtual clock.

Each test runs a whole campaign through :class:`Dialer` against the store (SQLite
and PostgreSQL) and asserts what an operator would see: who was dialled when,
how many calls were in flight, each contact's attempts and final result.
"""

from __future__ import annotations

import asyncio
import time as walltime
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.campaigns import dialer as dialer_module
from agent.campaigns.definition import CampaignSpec, Contact, load_campaign
from agent.campaigns.dialer import CampaignClock, Dialer, DialerEvent
from agent.campaigns.dispatch import DialRequest
from agent.campaigns.policy import RetryPolicy, Window
from agent.campaigns.records import AttemptRecord, CampaignSummary
from agent.campaigns.store import CallRecord, CampaignStore
from agent.core import clock

# a dialer that never finishes is a failure, not a hang
pytestmark = pytest.mark.timeout(30)

MONDAY_NOON = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)
SATURDAY_NOON = datetime(2024, 1, 13, 12, 0, tzinfo=UTC)
ALWAYS = (Window(frozenset(range(7)), time(0), None),)
BERLIN, LOS_ANGELES = "Europe/Berlin", "America/Los_Angeles"

#: what the fake answers for one attempt: a disposition, a full record, or an error to raise
Scripted = str | CallRecord | Exception


def people(
    n: int, *, zone: str = "America/New_York", priorities: Sequence[int] = ()
) -> list[Contact]:
    """``n`` contacts on CSV lines 2.. with distinct numbers."""
    return [
        Contact(
            line=i + 2,
            number=f"+1555010{i:04d}",
            zones=(zone,),
            priority=priorities[i] if priorities else 0,
            variables={},
        )
        for i in range(n)
    ]


def spec(**changes: Any) -> CampaignSpec:
    values: dict[str, Any] = {"windows": ALWAYS, "max_concurrent": 2, "max_per_second": 50.0}
    return CampaignSpec(**{**values, **changes})


@dataclass
class Dial:
    """One call the fake placed: loop seconds and campaign-clock times at entry and exit."""

    request: DialRequest
    t_in: float
    at_in: datetime
    t_out: float | None = None
    at_out: datetime | None = None


class ScriptedDispatcher:
    """Answers each (number, attempt_no) as scripted (default ``completed``).

    Each call lasts its number's scripted length on the loop's clock. Entries and
    exits go to ``timeline`` in the order they happen (with the dialer's events).
    """

    records_calls = False

    def __init__(
        self,
        script: dict[tuple[str, int], Scripted] | None = None,
        *,
        lengths: dict[str, float] | None = None,
        length: float = 60.0,
        on_dial: Callable[[DialRequest], Awaitable[None]] | None = None,
    ) -> None:
        self.script = script or {}
        self.lengths = lengths or {}
        self.length = length
        self.on_dial = on_dial
        self.dials: list[Dial] = []
        self.timeline: list[tuple[str, Any]] = []
        self.clock = CampaignClock(simulated=True)
        self.store: CampaignStore | None = None
        #: set when the dialer reports the campaign in that status
        self.status_seen: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def dial(self, request: DialRequest) -> CallRecord:
        loop = asyncio.get_running_loop()
        placed = Dial(request, loop.time(), self.clock.now())
        self.dials.append(placed)
        self.timeline.append(("in", request))
        try:
            if self.on_dial is not None:
                await self.on_dial(request)
            await asyncio.sleep(self.lengths.get(request.number, self.length))
            answer = self.script.get((request.number, request.attempt_no), "completed")
            if isinstance(answer, Exception):
                raise answer
            return answer if isinstance(answer, CallRecord) else CallRecord(disposition=answer)
        finally:
            placed.t_out, placed.at_out = loop.time(), self.clock.now()
            self.timeline.append(("out", request))

    async def aclose(self) -> None:
        return None

    def attempts_of(self, number: str) -> list[int]:
        return [d.request.attempt_no for d in self.dials if d.request.number == number]


@dataclass
class Ran:
    statuses: list[str]
    events: list[DialerEvent]
    records: list[AttemptRecord]
    summary: CampaignSummary
    results: dict[int, str] = field(default_factory=dict)
    #: the pacing burst the (first) dialer was built with
    burst: int = 1

    def attempts(self, line: int) -> list[AttemptRecord]:
        return sorted(
            (r for r in self.records if r.contact_line == line), key=lambda r: r.attempt_no
        )


async def run_campaign(
    db_url: str,
    campaign: CampaignSpec,
    contacts: list[Contact],
    fake: ScriptedDispatcher,
    *,
    start: datetime = MONDAY_NOON,
    dnc_prefixes: Sequence[str] = (),
    setup: Callable[[CampaignStore, int], Awaitable[None]] | None = None,
    control: Callable[[CampaignStore, int], Coroutine[Any, Any, None]] | None = None,
    dialer_ids: Sequence[str] = ("d1",),
    deadline: timedelta = timedelta(days=7),
) -> Ran:
    """Create the campaign, run its dialers (and ``control``) to the end, read back the store.

    A dialer still running after ``deadline`` of campaign time fails the test.
    """
    store = await CampaignStore.open(db_url)
    try:
        cid = await store.create_campaign(
            "spring", campaign.to_json(), contacts, source={}, now=start, dnc_prefixes=dnc_prefixes
        )
        row = await store.campaign("spring")
        fake.clock, fake.store = CampaignClock(simulated=True, start=start), store
        if setup is not None:
            await setup(store, cid)
        events: list[DialerEvent] = []

        def on_event(event: DialerEvent) -> None:
            events.append(event)
            fake.timeline.append(("event", event))
            if event.kind == "status" and event.status:
                fake.status_seen[event.status].set()

        dialers = [
            Dialer(
                store, row, campaign, fake, fake.clock, dialer_id=name, on_event=on_event, poll=0.02
            )
            for name in dialer_ids
        ]
        async with asyncio.timeout(deadline.total_seconds()), asyncio.TaskGroup() as group:
            runs = [group.create_task(d.run()) for d in dialers]
            if control is not None:
                # a control still waiting for something once the dialers are done never sees it
                helper = group.create_task(control(store, cid))
                await asyncio.wait(runs)
                helper.cancel()
        results = {
            e.contact_line: e.result
            for e in events
            if e.kind in ("finished", "skipped") and e.result
        }
        return Ran(
            [r.result() for r in runs],
            events,
            await store.attempt_records(cid),
            await store.summary("spring"),
            results,
            dialers[0].pacer.burst,
        )
    finally:
        await store.aclose()


def run(campaign: Coroutine[Any, Any, Ran]) -> Ran:
    return clock.run(campaign, virtual=True)


# -- concurrency and pacing ---------------------------------------------------------------


def test_never_more_calls_in_flight_than_max_concurrent(db_url: str) -> None:
    contacts = people(20)
    lengths = {c.number: 20.0 + (i * 37) % 50 for i, c in enumerate(contacts)}
    fake = ScriptedDispatcher(lengths=lengths)

    ran = run(run_campaign(db_url, spec(max_concurrent=3), contacts, fake))

    live = peak = 0
    for kind, _ in fake.timeline:
        live += {"in": 1, "out": -1}.get(kind, 0)
        peak = max(peak, live)
    assert peak == 3
    assert sorted(d.request.number for d in fake.dials) == sorted(c.number for c in contacts)
    assert ran.statuses == ["done"]
    assert ran.summary.results == {"completed": 20}


def test_dial_starts_never_exceed_the_token_bucket(db_url: str) -> None:
    contacts = people(30)
    fake = ScriptedDispatcher(length=3.0)
    campaign = spec(max_concurrent=10, max_per_second=2.0)

    ran = run(run_campaign(db_url, campaign, contacts, fake))

    burst = ran.burst
    starts = sorted(d.t_in for d in fake.dials)
    assert len(starts) == 30
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            allowed = burst + campaign.max_per_second * (starts[j] - first)
            assert j - i + 1 <= allowed + 1e-6, (i, j, starts[i : j + 1])
    # the bucket is used, not just respected: a burst at once, then one every half second
    assert starts[:burst] == [starts[0]] * burst
    assert starts[-1] - starts[0] < (30 - burst) / 2.0 + 0.5
    assert ran.summary.results == {"completed": 30}


# -- calling windows ----------------------------------------------------------------------


def test_dials_only_inside_the_window_in_the_callees_zone(db_url: str, tmp_path: Path) -> None:
    yaml_file = tmp_path / "spring.yaml"
    yaml_file.write_text(
        "windows:\n"
        '  - {days: mon-fri, start: "09:00", end: "17:00"}\n'
        "pacing: {max_concurrent: 2, max_per_second: 5}\n"
        "retry: {after: {no-answer: 8h}}\n",
        encoding="utf-8",
    )
    campaign = load_campaign(yaml_file)
    la, berlin = people(3, zone=LOS_ANGELES), people(6, zone=BERLIN)[3:]
    zone_of = {c.number: c.zones[0] for c in la + berlin}
    # Berlin's first callee answers no: the retry 8 h later is 17:01 local, after hours
    fake = ScriptedDispatcher({(berlin[0].number, 1): "no-answer"})

    # 09-17 in Berlin and 09-17 in Los Angeles never overlap: never called
    both = Contact(9, "+15550109999", (BERLIN, LOS_ANGELES), 0, {})

    ran = run(run_campaign(db_url, campaign, [*la, *berlin, both], fake, start=SATURDAY_NOON))

    assert ran.summary.results == {"completed": 6, "no-window": 1}
    assert ran.results[both.line] == "no-window"
    assert fake.attempts_of(both.number) == []
    for d in fake.dials:
        local = d.at_in.astimezone(ZoneInfo(zone_of[d.request.number]))
        assert local.weekday() < 5 and time(9) <= local.time() < time(17), (d.request, local)
    first = {
        z: min(d.at_in for d in fake.dials if zone_of[d.request.number] == z)
        for z in zone_of.values()
    }
    assert abs(first[BERLIN] - datetime(2024, 1, 15, 9, tzinfo=ZoneInfo(BERLIN))) < timedelta(
        seconds=1
    )
    assert abs(
        first[LOS_ANGELES] - datetime(2024, 1, 15, 9, tzinfo=ZoneInfo(LOS_ANGELES))
    ) < timedelta(seconds=1)
    berlin_numbers = {c.number for c in berlin}
    last_berlin_first_dial = max(
        d.at_in
        for d in fake.dials
        if d.request.number in berlin_numbers and d.request.attempt_no == 1
    )
    assert last_berlin_first_dial < first[LOS_ANGELES]
    retry = next(d for d in fake.dials if d.request.attempt_no == 2)
    assert retry.request.number == berlin[0].number
    tuesday_nine = datetime(2024, 1, 16, 9, tzinfo=ZoneInfo(BERLIN))
    assert abs(retry.at_in - tuesday_nine) < timedelta(seconds=1)


# -- retries ------------------------------------------------------------------------------


def test_retry_delays_follow_the_disposition_and_back_off(db_url: str) -> None:
    once, twice, never = people(3)
    script: dict[tuple[str, int], Scripted] = {
        (once.number, 1): "busy",
        (twice.number, 1): "busy",
        (twice.number, 2): "busy",
        **{(never.number, n): "no-answer" for n in (1, 2, 3, 4)},
    }
    fake = ScriptedDispatcher(script)
    retry = RetryPolicy(max_attempts=3, after={"busy": 600, "no-answer": 3600}, backoff=2.0)

    ran = run(run_campaign(db_url, spec(max_concurrent=3, retry=retry), [once, twice, never], fake))

    def gaps(line: int) -> list[float]:
        rows = ran.attempts(line)
        return [
            (b.started_at - a.ended_at).total_seconds()  # type: ignore[operator]
            for a, b in zip(rows, rows[1:], strict=False)
        ]

    assert [r.disposition for r in ran.attempts(once.line)] == ["busy", "completed"]
    assert 600 <= gaps(once.line)[0] < 605
    assert [r.disposition for r in ran.attempts(twice.line)] == ["busy", "busy", "completed"]
    first, second = gaps(twice.line)
    assert 600 <= first < 605 and 1200 <= second < 1205
    assert [r.disposition for r in ran.attempts(never.line)] == ["no-answer"] * 3
    assert all(3600 * 2**k <= g < 3600 * 2**k + 5 for k, g in enumerate(gaps(never.line)))
    assert ran.results == {
        once.line: "completed",
        twice.line: "completed",
        never.line: "max-attempts",
    }


def test_final_dispositions_end_the_contact_after_one_attempt(db_url: str) -> None:
    message, silent, failed, rejected = people(4)
    script: dict[tuple[str, int], Scripted] = {
        (message.number, 1): CallRecord(disposition="voicemail", voicemail_left=True),
        (silent.number, 1): "voicemail",
        (failed.number, 1): "failed",
        (rejected.number, 1): "rejected",
    }
    fake = ScriptedDispatcher(script)
    retry = RetryPolicy(max_attempts=3, after={"failed": None, "voicemail": 7200})

    ran = run(
        run_campaign(
            db_url, spec(max_concurrent=4, retry=retry), [message, silent, failed, rejected], fake
        )
    )

    assert fake.attempts_of(message.number) == [1]
    assert fake.attempts_of(failed.number) == [1]
    assert fake.attempts_of(rejected.number) == [1]
    assert fake.attempts_of(silent.number) == [1, 2]  # no message left: called again
    assert ran.results == {
        message.line: "voicemail-left",
        silent.line: "completed",
        failed.line: "failed",
        rejected.line: "rejected",
    }
    assert ran.summary.results == {"voicemail-left": 1, "completed": 1, "failed": 1, "rejected": 1}


# -- do-not-call --------------------------------------------------------------------------


def test_do_not_call_is_checked_again_right_before_each_dial(db_url: str) -> None:
    first, later, premium, other = people(4, priorities=(9, 1, 5, 0))
    premium = Contact(premium.line, "+19005550123", premium.zones, premium.priority, {})
    fake = ScriptedDispatcher()

    async def block_later(request: DialRequest) -> None:
        if request.number == first.number:
            assert fake.store is not None
            await fake.store.add_dnc("number", later.number, now=fake.clock.now(), campaign_id=None)

    fake.on_dial = block_later
    contacts = [first, later, premium, other]

    ran = run(run_campaign(db_url, spec(max_concurrent=1), contacts, fake, dnc_prefixes=["+1900"]))

    assert [d.request.number for d in fake.dials] == [first.number, other.number]
    assert ran.results == {
        first.line: "completed",
        later.line: "dnc",
        premium.line: "dnc",
        other.line: "completed",
    }
    assert {r.contact_line for r in ran.records} == {first.line, other.line}
    assert ran.summary.results == {"completed": 2, "dnc": 2}


# -- pause, resume, cancel ----------------------------------------------------------------


async def change_status(
    store: CampaignStore, cid: int, status: str, fake: ScriptedDispatcher
) -> None:
    """Change the status as ``campaign pause|resume|cancel`` from another terminal would.

    As for a person at a terminal, some wall time passes (virtual time held
    still) before the dialer's next pass, whichever clock it reads the status by.
    """
    allowed = ("paused",) if status == "running" else ("running",)
    if status == "running":
        fake.timeline.append((status, None))  # dials may start from here on
    assert await store.set_status(cid, status, now=fake.clock.now(), allowed_from=allowed)
    if status != "running":
        fake.timeline.append((status, None))  # committed: no dial may start from here on
    await hold_virtual_time(0.25)


async def hold_virtual_time(seconds: float) -> None:
    """Let ``seconds`` of wall time pass with virtual time held still."""
    await asyncio.get_running_loop().run_in_executor(None, walltime.sleep, seconds)


def test_pause_stops_new_dials_until_resumed(db_url: str) -> None:
    contacts = people(6)
    # the second call outlasts the pause: it must end normally afterwards
    fake = ScriptedDispatcher(lengths={contacts[1].number: 90.0})

    async def pause_then_resume(store: CampaignStore, cid: int) -> None:
        await asyncio.sleep(30)  # both first calls are in flight
        await change_status(store, cid, "paused", fake)
        # the first call ends at 60 s and the dialer finds the campaign paused;
        # a line is free now, but nothing may be dialled until the resume
        await fake.status_seen["paused"].wait()
        await hold_virtual_time(0.1)
        await change_status(store, cid, "running", fake)

    ran = run(
        run_campaign(db_url, spec(max_concurrent=2), contacts, fake, control=pause_then_resume)
    )

    kinds = [k for k, _ in fake.timeline]
    assert "running" in kinds, "the dialer never noticed the pause"
    paused, resumed = kinds.index("paused"), kinds.index("running")
    assert kinds[:paused].count("in") == 2
    assert "in" not in kinds[paused:resumed]
    assert kinds[paused:resumed].count("out") == 1  # the first call ended while paused
    assert ran.statuses == ["done"]
    assert ran.summary.results == {"completed": 6}
    assert [r.attempt_no for r in ran.records] == [1] * 6
    assert ran.attempts(contacts[1].line)[0].disposition == "completed"


def test_cancel_ends_waiting_contacts_and_lets_calls_in_flight_finish(db_url: str) -> None:
    contacts = people(6)
    fake = ScriptedDispatcher(lengths={contacts[1].number: 90.0})

    async def cancel(store: CampaignStore, cid: int) -> None:
        await asyncio.sleep(30)
        await change_status(store, cid, "cancelled", fake)

    ran = run(run_campaign(db_url, spec(max_concurrent=2), contacts, fake, control=cancel))

    assert ran.statuses == ["cancelled"]
    assert [d.request.number for d in fake.dials] == [contacts[0].number, contacts[1].number]
    assert ran.summary.results == {"completed": 2, "cancelled": 4}
    assert ran.summary.contacts == {"done": 6}
    assert [(r.status, r.disposition) for r in ran.records] == [("done", "completed")] * 2


def test_cancel_with_a_retryable_call_in_flight_leaves_nothing_pending(db_url: str) -> None:
    # the call in flight at the cancel ends busy: no retry may be left waiting
    contacts = people(4)
    fake = ScriptedDispatcher({(contacts[1].number, 1): "busy"}, lengths={contacts[1].number: 90.0})

    async def cancel(store: CampaignStore, cid: int) -> None:
        await asyncio.sleep(30)
        await change_status(store, cid, "cancelled", fake)

    ran = run(run_campaign(db_url, spec(max_concurrent=2), contacts, fake, control=cancel))

    assert ran.statuses == ["cancelled"]
    assert len(fake.dials) == 2
    assert ran.summary.contacts == {"done": 4}
    assert ran.summary.results == {"completed": 1, "cancelled": 3}


def test_a_cancel_is_seen_at_the_next_pass_however_fast_the_machine(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a machine so fast that no wall time passes while the campaign runs: a simulated
    # campaign must still read a status change made 30 s (campaign time) earlier
    frozen = SimpleNamespace(monotonic=lambda: 1000.0, time=walltime.time, sleep=walltime.sleep)
    monkeypatch.setattr(dialer_module, "time", frozen, raising=False)
    contacts = people(6)
    fake = ScriptedDispatcher(lengths={contacts[1].number: 90.0})

    async def cancel(store: CampaignStore, cid: int) -> None:
        await asyncio.sleep(30)
        await store.set_status(cid, "cancelled", now=fake.clock.now(), allowed_from=("running",))

    ran = run(run_campaign(db_url, spec(max_concurrent=2), contacts, fake, control=cancel))

    assert ran.statuses == ["cancelled"]
    assert len(fake.dials) == 2
    assert ran.summary.results == {"completed": 2, "cancelled": 4}


# -- priorities and failures ----------------------------------------------------------------


def test_higher_priority_contacts_are_dialled_first(db_url: str) -> None:
    priorities = (0, 5, 1, 9, 5, -2, 3)
    contacts = people(7, priorities=priorities)
    fake = ScriptedDispatcher()

    run(run_campaign(db_url, spec(max_concurrent=1), contacts, fake))

    expected = [c.number for c in sorted(contacts, key=lambda c: (-c.priority, c.line))]
    assert [d.request.number for d in fake.dials] == expected


def test_a_dispatcher_error_is_an_error_attempt_and_the_campaign_goes_on(db_url: str) -> None:
    contacts = people(5)
    flaky, broken = contacts[1], contacts[3]
    script: dict[tuple[str, int], Scripted] = {
        (flaky.number, 1): RuntimeError("trunk down"),
        **{(broken.number, n): ConnectionError("no route") for n in (1, 2, 3)},
    }
    fake = ScriptedDispatcher(script)

    ran = run(run_campaign(db_url, spec(max_concurrent=2), contacts, fake))

    assert ran.statuses == ["done"]
    assert [(r.status, r.disposition) for r in ran.attempts(flaky.line)] == [
        ("done", "error"),
        ("done", "completed"),
    ]
    error, retried = ran.attempts(flaky.line)
    assert (retried.started_at - error.ended_at).total_seconds() >= 900  # type: ignore[operator]
    assert [r.disposition for r in ran.attempts(broken.line)] == ["error"] * 3
    assert ran.results[broken.line] == "max-attempts"
    for c in (contacts[0], contacts[2], contacts[4]):
        assert [(r.attempt_no, r.disposition) for r in ran.attempts(c.line)] == [(1, "completed")]
    assert ran.summary.results == {"completed": 4, "max-attempts": 1}


# -- recovery and several dialers ---------------------------------------------------------


def test_an_attempt_of_a_dead_dialer_is_abandoned_and_redialled_as_the_next_attempt(
    db_url: str,
) -> None:
    contacts = people(3)
    fake = ScriptedDispatcher()

    async def die_mid_attempt(store: CampaignStore, cid: int) -> None:
        now = fake.clock.now()
        # a dialer that leased a contact and recorded its attempt, then died
        await store.set_status(cid, "running", now=now, allowed_from=("ready",))
        claimed = await store.claim_attempts(
            cid, "dead", now=now, limit=1, lease=30.0, opens=lambda _zones: now
        )
        ((held, _attempt_id, attempt_no),) = claimed.dial
        assert held.line == contacts[0].line and attempt_no == 1

    campaign = spec(lease_seconds=30.0)
    ran = run(
        run_campaign(
            db_url,
            campaign,
            contacts,
            fake,
            setup=die_mid_attempt,
            dialer_ids=("d2",),
            deadline=timedelta(hours=1),
        )
    )

    assert ran.statuses == ["done"]
    dead, again = ran.attempts(contacts[0].line)
    assert (dead.attempt_no, dead.dialer, dead.status) == (1, "dead", "abandoned")
    assert dead.ended_at is not None and dead.ended_at >= MONDAY_NOON + timedelta(seconds=30)
    assert (again.attempt_no, again.dialer, again.status) == (2, "d2", "done")
    assert again.started_at >= dead.ended_at
    assert fake.attempts_of(contacts[0].number) == [2]
    assert ran.summary.results == {"completed": 3}
    assert ran.summary.attempts == 4


def test_two_dialers_share_a_campaign_without_double_dialling(db_url: str) -> None:
    contacts = people(12)
    script: dict[tuple[str, int], Scripted] = {(c.number, 1): "busy" for c in contacts[::3]}
    lengths = {c.number: 15.0 + (i * 29) % 40 for i, c in enumerate(contacts)}
    fake = ScriptedDispatcher(script, lengths=lengths)
    retry = RetryPolicy(max_attempts=3, after={"busy": 60})

    ran = run(
        run_campaign(
            db_url, spec(max_concurrent=2, retry=retry), contacts, fake, dialer_ids=("d1", "d2")
        )
    )

    assert ran.statuses == ["done", "done"]
    placed = Counter((d.request.number, d.request.attempt_no) for d in fake.dials)
    assert max(placed.values()) == 1
    dialer_of = {r.attempt_id: r.dialer for r in ran.records}
    live: dict[str, int] = defaultdict(int)
    for kind, item in fake.timeline:
        if kind in ("in", "out"):
            step = 1 if kind == "in" else -1
            live[item.number] += step
            live[dialer_of[item.attempt_id]] += step
            assert live[item.number] <= 1, "two calls to one contact at once"
            assert max(live["d1"], live["d2"]) <= 2, "concurrency is per dialer"
    assert len(fake.dials) == 12 + 4
    assert {r.dialer for r in ran.records} == {"d1", "d2"}
    assert ran.summary.contacts == {"done": 12}
    assert ran.summary.results == {"completed": 12}
