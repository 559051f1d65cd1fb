"""The dialer: a thin async loop around the store and the scheduler's pure policy.

Each pass reads the campaign's status (so ``pause``, ``resume`` and ``cancel``
from another process take effect at once), gives expired leases back, leases
as many due contacts as concurrency and pacing allow, and for each one checks
the calling window in the callee's zones and the do-not-call lists *again*,
records the attempt, and only then places the call. Several dialers (processes
or machines) can run one campaign: the store's leases keep them apart.

A run owns everything it starts in one ``asyncio.TaskGroup``: the lease
heartbeat, the attempt recorder and every call. If any of them fails, the rest
are cancelled and awaited, the attempts that ended are still recorded, and the
error is raised. A store that goes away is waited for (up to
``store_patience`` seconds of wall time) before that happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.campaigns.dispatch import DialRequest, Dispatcher
from agent.campaigns.policy import Pacer, next_open, outcome_of
from agent.campaigns.store import (
    CallRecord,
    CampaignRow,
    CampaignStore,
    ClaimedContact,
    Finished,
    StoreError,
)

logger = logging.getLogger("agent.campaigns.dialer")

__all__ = ["CampaignClock", "Dialer", "DialerError", "DialerEvent"]


class DialerError(RuntimeError):
    """A helper or a call of a dialer run failed; the run stopped (the message says which)."""


class CampaignClock:
    """The campaign's notion of now: the wall clock, or simulated time on a virtual loop.

    Simulated time starts at ``start`` (the wall clock when the run began) and
    moves with the event loop's clock, so on a virtual loop a ten-minute retry
    or the night before a calling window opens passes at once.

    Args:
        simulated: follow the loop's (virtual) clock instead of the wall clock.
        start: simulated time at the first reading (default: the wall clock then).
    """

    def __init__(self, *, simulated: bool = False, start: datetime | None = None) -> None:
        self.simulated = simulated
        self._start = start
        self._t0: float | None = None

    def now(self) -> datetime:
        if not self.simulated:
            return datetime.now(UTC)
        loop = asyncio.get_running_loop()
        if self._t0 is None:
            self._t0 = loop.time()
            self._start = self._start or datetime.now(UTC)
        assert self._start is not None
        return self._start + timedelta(seconds=loop.time() - self._t0)

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def wait_real(self, seconds: float) -> None:
        """Wait on the wall clock even on a virtual loop (while paused, polling for resume)."""
        if self.simulated:
            await asyncio.get_running_loop().run_in_executor(None, time.sleep, seconds)
        else:
            await asyncio.sleep(seconds)


@dataclass(frozen=True)
class DialerEvent:
    """What the dialer reports to a progress display (no phone numbers)."""

    kind: str  # "dialed" | "finished" | "skipped" | "status"
    contact_line: int = 0
    attempt_no: int = 0
    disposition: str | None = None
    result: str | None = None
    retry_at: datetime | None = None
    status: str | None = None
    in_flight: int = 0
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


class Dialer:
    """Runs one campaign from this process until it is done, cancelled or stopped.

    Args:
        store: the open campaign store.
        campaign: the campaign's row.
        spec: its :class:`~.definition.CampaignSpec`.
        dispatcher: places the calls.
        clock: the campaign clock.
        dialer_id: this dialer's lease owner name (unique per process).
        dial_log: append ``campaign contact attempt`` per dial placed (an audit trail).
        on_event: called with each :class:`DialerEvent`.
        poll: seconds between looks at the store while idle on the wall clock.
        store_patience: wall seconds an unreachable store is waited for before the
            run stops with its error (calls in flight go on meanwhile).
    """

    def __init__(
        self,
        store: CampaignStore,
        campaign: CampaignRow,
        spec: Any,
        dispatcher: Dispatcher,
        clock: CampaignClock,
        *,
        dialer_id: str,
        dial_log: Path | None = None,
        on_event: Callable[[DialerEvent], None] | None = None,
        poll: float = 1.0,
        store_patience: float = 60.0,
    ) -> None:
        self.store = store
        self.campaign = campaign
        self.spec = spec
        self.dispatcher = dispatcher
        self.clock = clock
        self.dialer_id = dialer_id
        self.dial_log = dial_log
        self.on_event = on_event or (lambda _e: None)
        self.poll = poll
        # bursts of at most a tenth of a second's dials: any one-second window
        # holds at most max_per_second * 1.1 + 1 new dials
        self.pacer = Pacer(spec.max_per_second, burst=max(1, int(spec.max_per_second / 10)))
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        self.dialed = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._last_recover = float("-inf")
        self._to_record: list[tuple[Finished, asyncio.Future[None]]] = []
        self._recording: list[tuple[Finished, asyncio.Future[None]]] = []
        self._record_wake = asyncio.Event()
        self.store_patience = store_patience
        self._outage_since: float | None = None
        self._tg: asyncio.TaskGroup | None = None

    def stop(self) -> None:
        """Stop placing calls; :meth:`run` returns once the calls in flight have ended."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> str:
        """Dial until the campaign is done or cancelled (or :meth:`stop`); returns its status.

        Raises:
            StoreError: the store stayed unreachable longer than ``store_patience``.
            DialerError: a helper or a call failed. Either way nothing of the run is
                left running, and the calls it cut are abandoned (their leases expire;
                a later run records them so and dials them again).
        """
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                helpers = [
                    tg.create_task(self._renew_leases(), name="lease-heartbeat"),
                    tg.create_task(self._recorder(), name="attempt-recorder"),
                ]
                status = await self._loop()
                if self.in_flight:
                    await asyncio.wait(list(self.in_flight.values()))
                    if status == "cancelled":
                        # calls that were in flight may have scheduled retries
                        await self.store.cancel_pending(self.campaign.id, now=self.clock.now())
                for helper in helpers:
                    helper.cancel()
            return status
        except BaseExceptionGroup as group:
            first = _first_error(group)
            # raised to the caller, who reports it (``campaign start``: one line, -v the trace)
            logger.info(
                "dialer run stopped: a helper or call failed; the others were cancelled",
                extra={"campaign_id": self.campaign.id, "error": type(first).__name__},
                exc_info=first,
            )
            if isinstance(first, StoreError):
                raise first from None
            raise DialerError(
                f"campaign {self.campaign.name}: dialing stopped: {type(first).__name__}: {first}"[
                    :500
                ]
            ) from first
        finally:
            self._tg = None
            await self._record_leftovers()

    async def _loop(self) -> str:
        while True:
            try:
                return await self._passes()
            except StoreError as exc:
                await self._store_away("dialing", exc)

    async def _store_away(self, doing: str, exc: StoreError) -> None:
        """Wait a little for an unreachable store; re-raise once it has been away too long."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            logger.warning(
                "campaign store unreachable; waiting for it",
                extra={"campaign_id": self.campaign.id, "doing": doing},
            )
        if now - self._outage_since > self.store_patience:
            raise exc
        await self.clock.wait_real(min(2.0, 0.2 + (now - self._outage_since) / 4))

    async def _passes(self) -> str:
        cid = self.campaign.id
        last_status = None
        status = "running"
        checked = float("-inf")
        checked_at = datetime.min.replace(tzinfo=UTC)
        while True:
            now = self.clock.now()
            # pause, resume and cancel come from other processes (or tasks): read the
            # status again once 0.2 s of wall time or 1 s of campaign time has passed
            if time.monotonic() - checked >= 0.2 or (now - checked_at).total_seconds() >= 1.0:
                status = await self.store.status(cid)
                checked, checked_at = time.monotonic(), now
                self._outage_since = None
            if status != last_status:
                self.on_event(DialerEvent("status", status=status, in_flight=len(self.in_flight)))
                last_status = status
            if status == "cancelled":
                await self.store.cancel_pending(cid, now=now)
                return status
            if status == "done" or self._stopping:
                return status
            if status == "paused":
                await self._wait(self.poll, real=True)
                checked = float("-inf")
                continue
            if status == "ready":
                await self.store.set_status(cid, "running", now=now, allowed_from=("ready",))
                status = "running"
            mono = self.clock.monotonic()
            if mono - self._last_recover >= self.spec.lease_seconds / 3:
                self._last_recover = mono
                await self.store.recover_expired(cid, now=now, decide=self._after_abandoned(now))
            free = self.spec.max_concurrent - len(self.in_flight)
            want = min(free, self.pacer.available(mono))
            if want > 0:
                claimed = await self.store.claim_attempts(
                    cid,
                    self.dialer_id,
                    now=now,
                    limit=want,
                    lease=self.spec.lease_seconds,
                    opens=functools.partial(self._opens, now),
                )
                for contact, result in claimed.skipped:
                    self.on_event(DialerEvent("skipped", contact.line, result=result))
                for contact, attempt_id, attempt_no in claimed.dial:
                    self._launch(contact, attempt_id, attempt_no)
                if claimed.dial or claimed.skipped or claimed.deferred:
                    continue
            if free <= 0:
                # every line is busy: nothing to decide until a call ends
                await self._wait(self.poll if not self.clock.simulated else 24 * 3600.0)
                continue
            pending, dialing, due, lease = await self.store.outlook(cid)
            if pending == 0 and dialing == 0 and not self.in_flight:
                before = await self.store.set_status(
                    cid, "done", now=self.clock.now(), allowed_from=("running", "ready")
                )
                # refused: someone paused or cancelled it meanwhile; that status stands
                final = "done" if before is not None else await self.store.status(cid)
                self.on_event(DialerEvent("status", status=final, in_flight=0))
                return final
            await self._wait(self._idle_for(now, free, pending, dialing, due, lease))

    def _idle_for(
        self,
        now: datetime,
        free: int,
        pending: int,
        dialing: int,
        due: datetime | None,
        lease: datetime | None,
    ) -> float:
        """How long to wait before the next pass (a finished call wakes it sooner)."""
        # on the wall clock, look again every `poll` (pause, cancel, other dialers);
        # in simulated time nothing else changes while we wait
        wait = self.poll if not self.clock.simulated else 24 * 3600.0
        if pending and free > 0 and due is not None:
            if due <= now:
                wait = min(wait, max(self.pacer.wait(self.clock.monotonic()), 0.001))
            else:
                wait = min(wait, (due - now).total_seconds())
        if dialing > len(self.in_flight) and lease is not None:
            # another dialer's (or a dead one's) lease: look again when it expires
            wait = min(wait, max((lease - now).total_seconds(), 0.0) + 0.01)
        return max(wait, 0.001)

    async def _wait(self, seconds: float, *, real: bool = False) -> None:
        self._wake.clear()
        if real:
            await self.clock.wait_real(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    def _opens(self, now: datetime, zones: tuple[str, ...]) -> datetime | None:
        return next_open(now, zones, self.spec.windows)

    def _launch(self, contact: ClaimedContact, attempt_id: int, attempt_no: int) -> None:
        """Place the call of an attempt the store has just recorded."""
        self.pacer.take(self.clock.monotonic())
        request = DialRequest(
            campaign=self.campaign.name,
            campaign_id=self.campaign.id,
            contact_id=contact.id,
            contact_line=contact.line,
            attempt_id=attempt_id,
            attempt_no=attempt_no,
            number=contact.number,
            variables=contact.variables,
            caller_id=self.spec.caller_id,
        )
        if self.dial_log is not None:
            _append_line(self.dial_log, f"{self.campaign.id} {contact.id} {attempt_no}")
        self.dialed += 1
        assert self._tg is not None, "calls are placed only inside run()"
        task = self._tg.create_task(self._call(request), name=f"attempt-{attempt_id}")
        self.in_flight[contact.id] = task
        self.on_event(
            DialerEvent("dialed", contact.line, attempt_no, in_flight=len(self.in_flight))
        )

    async def _call(self, request: DialRequest) -> None:
        try:
            try:
                record = await self.dispatcher.dial(request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.exception("dispatcher failed", extra={"attempt_id": request.attempt_id})
                record = CallRecord(
                    disposition="error", detail=f"{type(exc).__name__}: {exc}"[:500]
                )
            try:
                outcome = outcome_of(record.disposition, record.voicemail_left)
            except ValueError:
                outcome = "error"
            decision = self.spec.retry.decide(outcome, request.attempt_no)
            end = self.clock.now()
            next_at = end + timedelta(seconds=decision.delay or 0.0) if decision.retry else None
            result = None if decision.retry else decision.result
            await self._record(
                Finished(request.contact_id, request.attempt_id, record, end, next_at, result)
            )
            self.on_event(
                DialerEvent(
                    "finished",
                    request.contact_line,
                    request.attempt_no,
                    disposition=record.disposition,
                    result=None if decision.retry else decision.result,
                    retry_at=next_at,
                    in_flight=len(self.in_flight) - 1,
                )
            )
        finally:
            self.in_flight.pop(request.contact_id, None)
            self._wake.set()

    async def _record(self, finished: Finished) -> None:
        """Hand an ended attempt to the recorder; returns once it is committed (or given up)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._to_record.append((finished, done))
        self._record_wake.set()
        await done

    async def _recorder(self) -> None:
        """Commits ended attempts; calls that end together share one transaction.

        An unreachable store is retried (the calls are not lost meanwhile) until it
        has been away longer than ``store_patience``; then the run stops and the
        batch is left for :meth:`_record_leftovers`.
        """
        while True:
            await self._record_wake.wait()
            self._record_wake.clear()
            self._recording, self._to_record = self._to_record, []
            if not self._recording:
                continue
            while True:
                try:
                    await self.store.finish_attempts(
                        self.dialer_id,
                        [f for f, _ in self._recording],
                        dedupe_calls=self.dispatcher.records_calls,
                    )
                    self._outage_since = None
                    break
                except StoreError as exc:
                    await self._store_away("recording", exc)
            batch, self._recording = self._recording, []
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    async def _record_leftovers(self) -> None:
        """After the run: commit the ended attempts it had not committed yet (one try)."""
        # a future that is not done, or cancelled with its waiting call, was never committed
        leftovers = [
            f
            for f, done in [*self._recording, *self._to_record]
            if not done.done() or done.cancelled()
        ]
        self._recording, self._to_record = [], []
        if not leftovers:
            return
        try:
            # a batch cut off mid-commit may have landed: never insert a call twice
            await self.store.finish_attempts(self.dialer_id, leftovers, dedupe_calls=True)
        except Exception:
            logger.exception(
                "cannot record ended attempts; their leases expire and they count as abandoned",
                extra={"attempt_ids": [f.attempt_id for f in leftovers]},
            )

    def _after_abandoned(
        self, now: datetime
    ) -> Callable[[int], tuple[datetime | None, str | None]]:
        def decide(attempts: int) -> tuple[datetime | None, str | None]:
            decision = self.spec.retry.decide("abandoned", max(attempts, 1))
            if attempts == 0 or decision.retry:
                return now + timedelta(seconds=(decision.delay or 0.0) if attempts else 0.0), None
            return None, decision.result

        return decide

    async def _renew_leases(self) -> None:
        every = max(self.spec.lease_seconds / 3, 0.5)
        while True:
            await asyncio.sleep(every)
            if self.in_flight:
                until = self.clock.now() + timedelta(seconds=self.spec.lease_seconds)
                with contextlib.suppress(StoreError):
                    await self.store.renew(self.dialer_id, list(self.in_flight), until=until)


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The first error in a (nested) exception group that is not a cancellation."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_error(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]


def default_dialer_id() -> str:
    """``host-pid``: unique per running process."""
    return f"{os.uname().nodename}-{os.getpid()}"


def _append_line(path: Path, line: str) -> None:
    # flushed to disk before the call is placed: an audit that survives kill -9
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
