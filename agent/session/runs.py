"""Runs: one agent reply each, with an id, a version and a future that always settles.

A *run* is one livekit speech handle (its id is the run id). The session starts
one per reply and :class:`RunTracker` keeps, for each, the callee turn it
answers and a future that settles exactly once: when the reply completes, is
interrupted, fails, or is aborted because the call is torn down. A callee turn
that gets no reply settles at once with ``no_reply``. Waiting on a turn
(:meth:`RunTracker.wait_turn`) never hangs on a reply that will not come.

The tracker's ``version`` moves *before* an abort: anything that captured the
version of a run it was working for (a marker action, a spoken replacement, a
late tool result) checks :meth:`RunTracker.live` and drops its output once the
call is being torn down. Interrupts name their run: :meth:`RunTracker.current`
tells a stale interrupt (for a run that is over or was superseded) from a live
one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agent.core.messages import RunOutcome

__all__ = ["RunTracker", "RunRecord", "RunResult"]


@dataclass(frozen=True)
class RunResult:
    """How a run (or a callee turn) ended."""

    run_id: str | None
    turn_id: str | None
    outcome: RunOutcome
    text: str = ""


@dataclass
class RunRecord:
    run_id: str
    turn_id: str | None
    version: int
    done: asyncio.Future[RunResult] = field(repr=False)


class RunTracker:
    """The session's runs: ids, the turn each answers, and futures that always settle."""

    def __init__(self) -> None:
        self.version = 0
        self._runs: dict[str, RunRecord] = {}
        self._turns: dict[str, asyncio.Future[RunResult]] = {}
        self._latest: str | None = None
        self.closed = False

    # -- runs ------------------------------------------------------------------

    def begin(self, run_id: str, turn_id: str | None) -> RunRecord:
        """A new run started (answering ``turn_id`` when it is a reply to a callee turn)."""
        loop = asyncio.get_running_loop()
        rec = RunRecord(run_id, turn_id, self.version, loop.create_future())
        self._runs[run_id] = rec
        self._latest = run_id
        if self.closed:
            self._settle(rec, "aborted", "")
        return rec

    def settle(self, run_id: str, outcome: RunOutcome, text: str = "") -> RunResult | None:
        """Settle a run (idempotent: the first outcome wins). Returns it, or None if unknown."""
        rec = self._runs.get(run_id)
        if rec is None:
            return None
        return self._settle(rec, outcome, text)

    def _settle(self, rec: RunRecord, outcome: RunOutcome, text: str) -> RunResult:
        if rec.done.done():
            return rec.done.result()
        result = RunResult(rec.run_id, rec.turn_id, outcome, text)
        rec.done.set_result(result)
        if rec.turn_id is not None:
            fut = self._turns.get(rec.turn_id)
            if fut is not None and not fut.done():
                fut.set_result(result)
        return result

    def record(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def current(self, run_id: str) -> bool:
        """Whether ``run_id`` is a run still in flight in this version (not stale)."""
        rec = self._runs.get(run_id)
        return rec is not None and not rec.done.done() and rec.version == self.version

    def live(self, version: int) -> bool:
        """Whether work captured at ``version`` may still act (the call is not torn down)."""
        return version == self.version and not self.closed

    @property
    def latest(self) -> str | None:
        """The most recently started run."""
        return self._latest

    def in_flight(self) -> list[str]:
        return [r.run_id for r in self._runs.values() if not r.done.done()]

    # -- callee turns ----------------------------------------------------------

    def turn_future(self, turn_id: str) -> asyncio.Future[RunResult]:
        """The future of the reply to callee turn ``turn_id`` (created on first use)."""
        fut = self._turns.get(turn_id)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._turns[turn_id] = fut
            if self.closed:
                fut.set_result(RunResult(None, turn_id, "aborted"))
        return fut

    def no_reply(self, turn_id: str) -> None:
        """Callee turn ``turn_id`` gets no reply (blocked, gated): its future settles now."""
        fut = self.turn_future(turn_id)
        if not fut.done():
            fut.set_result(RunResult(None, turn_id, "no_reply"))

    async def wait_turn(self, turn_id: str) -> RunResult:
        """Wait for the reply to ``turn_id`` (it always settles: see :meth:`abort_all`)."""
        return await asyncio.shield(self.turn_future(turn_id))

    # -- teardown --------------------------------------------------------------

    def abort_all(self) -> list[RunResult]:
        """Tear down: move the version first, then settle every pending run and turn ``aborted``."""
        self.version += 1
        self.closed = True
        out = [
            self._settle(rec, "aborted", "") for rec in self._runs.values() if not rec.done.done()
        ]
        for turn_id, fut in self._turns.items():
            if not fut.done():
                fut.set_result(RunResult(None, turn_id, "aborted"))
        return out
