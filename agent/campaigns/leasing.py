"""What the dialers do to the store: lease contacts, record attempts and calls, recover.

:class:`Leasing` is a part of :class:`~.store.CampaignStore` (a mixin: it uses
the store's transactions). Every method is one short transaction, committed
before the dialer acts on it:

- :meth:`Leasing.claim_attempts` leases due contacts (``FOR UPDATE SKIP LOCKED``
  on PostgreSQL; on both, an ``UPDATE ... WHERE state = 'pending'`` only one
  dialer can win), checks windows and do-not-call, and writes each attempt row
  *before* its call is placed. ``(contact_id, attempt_no)`` is unique, so an
  attempt is dialled at most once.
- :meth:`Leasing.finish_attempts` records ended calls and their contacts' next
  states together (calls that end together share one transaction).
- :meth:`Leasing.recover_expired` marks the attempts of a dead dialer (lease
  expired) ``abandoned`` and gives their contacts back to the schedule.

All times come from the caller (the campaign clock), never from the database
server, so a simulated campaign can run on simulated time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.campaigns.schema import UTCDateTime, attempts, calls, campaigns, contacts, dnc, events

__all__ = ["CallRecord", "Claimed", "ClaimedContact", "Finished", "Leasing"]


@dataclass(frozen=True)
class ClaimedContact:
    """A contact this dialer now holds the lease of."""

    id: int
    line: int
    number: str = field(repr=False)
    zones: tuple[str, ...]
    priority: int
    variables: dict[str, str] = field(repr=False)
    #: attempts made before this one
    attempts: int


@dataclass(frozen=True)
class Claimed:
    """What one :meth:`CampaignStore.claim_attempts` did."""

    #: (contact, attempt id, attempt number) to dial now, in claim order
    dial: list[tuple[ClaimedContact, int, int]]
    #: contacts ended without a dial, with their result ("dnc", "no-window")
    skipped: list[tuple[ClaimedContact, str]]
    #: contacts outside their calling window, deferred to when it opens
    deferred: int


@dataclass(frozen=True)
class Finished:
    """One ended attempt for :meth:`CampaignStore.finish_attempts`."""

    contact_id: int
    attempt_id: int
    record: CallRecord
    ended_at: datetime
    #: the retry's due time; None ends the contact with ``result``
    next_at: datetime | None
    result: str | None


@dataclass(frozen=True)
class CallRecord:
    """How one dialled attempt ended."""

    disposition: str
    voicemail_left: bool = False
    amd_category: str | None = None
    duration: float | None = None
    call_id: str | None = None
    transcript_path: str | None = None
    recording_path: str | None = None
    detail: str | None = None
    #: already in the store (a worker recorded it); finishing the attempt must not add it again
    stored: bool = False


def _aware(value: Any) -> datetime | None:
    """A datetime from an aggregate (MIN/MAX) as aware UTC (SQLite returns it naive)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value  # type: ignore[no-any-return]


def _call_values(attempt_id: int, record: CallRecord, now: datetime) -> dict[str, Any]:
    return {
        "attempt_id": attempt_id,
        "call_id": record.call_id,
        "disposition": record.disposition,
        "voicemail_left": record.voicemail_left,
        "amd_category": record.amd_category,
        "duration": record.duration,
        "transcript_path": record.transcript_path,
        "recording_path": record.recording_path,
        "detail": record.detail,
        "recorded_at": now,
    }


class Leasing:
    """The dialers' operations on the store (see the module docstring)."""

    is_postgres: bool

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def _event(
        self,
        conn: AsyncConnection,
        campaign_id: int,
        contact_id: int | None,
        now: datetime,
        kind: str,
        detail: dict[str, Any],
    ) -> None:
        await conn.execute(
            insert(events).values(
                campaign_id=campaign_id, contact_id=contact_id, at=now, kind=kind, detail=detail
            )
        )

    async def claim_attempts(
        self,
        campaign_id: int,
        dialer: str,
        *,
        now: datetime,
        limit: int,
        lease: float,
        opens: Callable[[tuple[str, ...]], datetime | None],
    ) -> Claimed:
        """Lease due contacts and record an attempt for each one that may be dialled now.

        One transaction, committed before any of the calls is placed: up to
        ``limit`` due contacts (highest priority, then longest due) are checked
        against their calling window (``opens(zones)``: when the window is open,
        ``now`` or earlier; a later time defers the contact to it; None ends it
        ``no-window``) and, right then, against the global and campaign
        do-not-call lists (``dnc``). The rest are leased and get their next attempt.
        """
        if limit <= 0:
            return Claimed([], [], 0)
        until = now + timedelta(seconds=lease)
        async with self._tx() as conn:
            query = (
                select(
                    contacts.c.id,
                    contacts.c.line,
                    contacts.c.number,
                    contacts.c.zones,
                    contacts.c.priority,
                    contacts.c.variables,
                    contacts.c.attempts,
                    # the do-not-call check, in the same statement as the claim
                    select(dnc.c.id)
                    .where(
                        or_(dnc.c.campaign_id.is_(None), dnc.c.campaign_id == campaign_id),
                        or_(
                            (dnc.c.kind == "number") & (dnc.c.value == contacts.c.number),
                            (dnc.c.kind == "prefix")
                            & (
                                func.substr(contacts.c.number, 1, func.length(dnc.c.value))
                                == dnc.c.value
                            ),
                        ),
                    )
                    .exists()
                    .label("blocked"),
                )
                .where(
                    contacts.c.campaign_id == campaign_id,
                    contacts.c.state == "pending",
                    contacts.c.next_at <= now,
                    # a pause or cancel committed since the dialer last looked wins
                    select(campaigns.c.id)
                    .where(campaigns.c.id == campaign_id, campaigns.c.status == "running")
                    .exists(),
                )
                .order_by(contacts.c.priority.desc(), contacts.c.next_at, contacts.c.id)
                .limit(limit)
            )
            if self.is_postgres:
                query = query.with_for_update(skip_locked=True)
            rows = (await conn.execute(query)).all()
            found = [
                ClaimedContact(
                    r.id,
                    r.line,
                    r.number,
                    tuple(r.zones),
                    r.priority,
                    dict(r.variables),
                    r.attempts,
                )
                for r in rows
            ]
            blocked = {r.number for r in rows if r.blocked}
            if not found:
                return Claimed([], [], 0)
            later: dict[datetime, list[int]] = {}
            skipped: list[tuple[ClaimedContact, str]] = []
            ready = []
            for c in found:
                opening = opens(c.zones)
                if opening is None:
                    skipped.append((c, "no-window"))
                elif opening > now:
                    later.setdefault(opening, []).append(c.id)
                else:
                    ready.append(c)
            skipped += [(c, "dnc") for c in ready if c.number in blocked]
            ready = [c for c in ready if c.number not in blocked]
            for opening, ids in later.items():
                await conn.execute(
                    update(contacts)
                    .where(contacts.c.id.in_(ids), contacts.c.state == "pending")
                    .values(next_at=opening, updated_at=now)
                )
            for result in {r for _, r in skipped}:
                ids = [c.id for c, r in skipped if r == result]
                await conn.execute(
                    update(contacts)
                    .where(contacts.c.id.in_(ids), contacts.c.state == "pending")
                    .values(state="done", result=result, updated_at=now)
                )
            if skipped:
                await conn.execute(
                    insert(events),
                    [
                        {
                            "campaign_id": campaign_id,
                            "contact_id": c.id,
                            "at": now,
                            "kind": "closed",
                            "detail": {"result": r},
                        }
                        for c, r in skipped
                    ],
                )
            dial: list[tuple[ClaimedContact, int, int]] = []
            if ready:
                won = {
                    row[0]
                    for row in await conn.execute(
                        update(contacts)
                        .where(
                            contacts.c.id.in_([c.id for c in ready]),
                            contacts.c.state == "pending",
                        )
                        .values(
                            state="dialing",
                            lease_owner=dialer,
                            lease_until=until,
                            attempts=contacts.c.attempts + 1,
                            updated_at=now,
                        )
                        .returning(contacts.c.id)
                    )
                }
                ready = [c for c in ready if c.id in won]
            if ready:
                inserted = await conn.execute(
                    insert(attempts).returning(
                        attempts.c.id, attempts.c.contact_id, sort_by_parameter_order=True
                    ),
                    [
                        {
                            "campaign_id": campaign_id,
                            "contact_id": c.id,
                            "attempt_no": c.attempts + 1,
                            "dialer": dialer,
                            "status": "dialing",
                            "started_at": now,
                        }
                        for c in ready
                    ],
                )
                attempt_ids = {contact_id: attempt_id for attempt_id, contact_id in inserted}
                dial = [(c, int(attempt_ids[c.id]), c.attempts + 1) for c in ready]
        return Claimed(dial, skipped, sum(len(v) for v in later.values()))

    async def finish_attempts(
        self, dialer: str, finished: Sequence[Finished], *, dedupe_calls: bool = False
    ) -> None:
        """Record several ended calls and their contacts' next states in one transaction.

        The batched form of :meth:`finish_attempt` (what the dialer uses: calls
        that end together are committed together). A contact whose lease this
        dialer lost keeps the state its new holder gave it.
        """
        if not finished:
            return
        async with self._tx() as conn:
            await conn.execute(
                update(attempts)
                .where(attempts.c.id == bindparam("b_attempt"))
                .values(
                    status="done", ended_at=bindparam("b_end"), disposition=bindparam("b_disp")
                ),
                [
                    {"b_attempt": f.attempt_id, "b_end": f.ended_at, "b_disp": f.record.disposition}
                    for f in finished
                ],
            )
            have: set[int] = set()
            if dedupe_calls:
                # another process (a worker) may have recorded the call already
                have = set(
                    (
                        await conn.execute(
                            select(calls.c.attempt_id).where(
                                calls.c.attempt_id.in_([f.attempt_id for f in finished])
                            )
                        )
                    ).scalars()
                )
            new_calls = [
                _call_values(f.attempt_id, f.record, f.ended_at)
                for f in finished
                if not f.record.stored and f.attempt_id not in have
            ]
            if new_calls:
                await conn.execute(insert(calls), new_calls)
            await conn.execute(
                update(contacts)
                .where(
                    contacts.c.id == bindparam("b_contact"),
                    contacts.c.lease_owner == dialer,
                    contacts.c.state == "dialing",
                )
                .values(
                    state=bindparam("b_state"),
                    next_at=func.coalesce(
                        bindparam("b_next", type_=UTCDateTime()), contacts.c.next_at
                    ),
                    result=bindparam("b_result"),
                    lease_owner=None,
                    lease_until=None,
                    updated_at=bindparam("b_end"),
                ),
                [
                    {
                        "b_contact": f.contact_id,
                        "b_state": "pending" if f.next_at is not None else "done",
                        "b_next": f.next_at,
                        "b_result": None if f.next_at is not None else f.result,
                        "b_end": f.ended_at,
                    }
                    for f in finished
                ],
            )

    async def renew(self, dialer: str, contact_ids: Sequence[int], *, until: datetime) -> None:
        """Extend this dialer's leases on contacts whose calls are still running."""
        if not contact_ids:
            return
        async with self._tx() as conn:
            await conn.execute(
                update(contacts)
                .where(contacts.c.id.in_(list(contact_ids)), contacts.c.lease_owner == dialer)
                .values(lease_until=until)
            )

    async def recover_expired(
        self,
        campaign_id: int,
        *,
        now: datetime,
        decide: Callable[[int], tuple[datetime | None, str | None]],
    ) -> int:
        """Abandon the open attempts of contacts whose lease expired; reschedule them.

        ``decide(attempts)`` returns the contact's (next_at, result) after an
        abandoned attempt. Returns how many contacts were recovered.
        """
        async with self._tx() as conn:
            query = select(contacts.c.id, contacts.c.attempts, contacts.c.lease_owner).where(
                contacts.c.campaign_id == campaign_id,
                contacts.c.state == "dialing",
                contacts.c.lease_until < now,
            )
            if self.is_postgres:
                query = query.with_for_update(skip_locked=True)
            expired = (await conn.execute(query)).all()
            for r in expired:
                await conn.execute(
                    update(attempts)
                    .where(attempts.c.contact_id == r.id, attempts.c.status == "dialing")
                    .values(status="abandoned", ended_at=now)
                )
                next_at, result = decide(r.attempts)
                values: dict[str, Any] = {
                    "lease_owner": None,
                    "lease_until": None,
                    "updated_at": now,
                }
                if next_at is not None:
                    values.update(state="pending", next_at=next_at)
                else:
                    values.update(state="done", result=result)
                await conn.execute(
                    update(contacts)
                    .where(contacts.c.id == r.id, contacts.c.state == "dialing")
                    .values(**values)
                )
                await self._event(
                    conn, campaign_id, r.id, now, "abandoned", {"dialer": r.lease_owner}
                )
        return len(expired)

    async def cancel_pending(self, campaign_id: int, *, now: datetime) -> int:
        """End every contact still waiting, with result ``cancelled``."""
        async with self._tx() as conn:
            done = await conn.execute(
                update(contacts)
                .where(contacts.c.campaign_id == campaign_id, contacts.c.state == "pending")
                .values(state="done", result="cancelled", updated_at=now)
            )
        return int(done.rowcount)

    async def outlook(self, campaign_id: int) -> tuple[int, int, datetime | None, datetime | None]:
        """(pending, dialing, earliest next_at of a pending contact, earliest lease expiry)."""
        async with self._tx() as conn:
            rows = (
                await conn.execute(
                    select(
                        contacts.c.state,
                        func.count(),
                        func.min(contacts.c.next_at),
                        func.min(contacts.c.lease_until),
                    )
                    .where(
                        contacts.c.campaign_id == campaign_id,
                        contacts.c.state.in_(("pending", "dialing")),
                    )
                    .group_by(contacts.c.state)
                )
            ).all()
        by_state = {r[0]: r for r in rows}
        pending = by_state.get("pending")
        dialing = by_state.get("dialing")
        due = _aware(pending[2]) if pending else None
        lease = _aware(dialing[3]) if dialing else None
        return (pending[1] if pending else 0, dialing[1] if dialing else 0, due, lease)

    async def call_for_attempt(self, attempt_id: int) -> CallRecord | None:
        """The call recorded for an attempt (by a worker, for LiveKit dispatch), if any."""
        async with self._tx() as conn:
            r = (await conn.execute(select(calls).where(calls.c.attempt_id == attempt_id))).first()
        if r is None:
            return None
        return CallRecord(
            r.disposition,
            bool(r.voicemail_left),
            r.amd_category,
            r.duration,
            r.call_id,
            r.transcript_path,
            r.recording_path,
            r.detail,
            stored=True,
        )

    async def record_call(self, attempt_id: int, record: CallRecord, *, now: datetime) -> None:
        """Record how an attempt's call ended, from the process that ran it (a worker)."""
        async with self._tx() as conn:
            await conn.execute(insert(calls).values(**_call_values(attempt_id, record, now)))
