"""The per-call watchdog: a background ballot on the agent's recent turns.

Every ``every``-th agent LLM request starts one ballot over the last
:data:`WINDOW_TURNS` turns, in a task the watchdog owns, so a reply never waits for
it. The ballot's six questions go to the oracle, guarded by ``timeout`` with the
heuristics (:mod:`guardrails.ballot_heuristics`) as fallback, or to the heuristics
alone. Answers become flags from 0 to 1 (``on_track``: how far off track), and the
flags a :class:`Verdict`:

- at or above :data:`ACT_AT` a flag acts (mode ``"on"``): a blocker (looping, unsafe
  next action) calls the ``interrupt`` callback of the latest request and queues a
  reminder; a concern (drifting, persona break, unverified success) queues a
  reminder; nits (off track) ride on the first reminder handed out, or go alone;
- from :data:`LOG_FROM` up to :data:`ACT_AT` a flag is logged only.

Mode ``"shadow"`` logs what it would do and changes nothing; ``"off"`` never asks.
Nothing raises out of :meth:`Watchdog.request`, :meth:`Watchdog.reminders` or the
background task: failures are logged as events (dicts with ``event`` =
``watchdog_verdict``, ``_shadow``, ``_busy``, ``_reminders``, ``_goal_changed``,
``_settled``, ``_oracle_error`` or ``_error``; ids and numbers, never transcripts).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from guardrails.ballot_heuristics import (
    Q_DRIFTING,
    Q_LOOPING,
    Q_ON_TRACK,
    Q_PERSONA,
    Q_UNSAFE,
    Q_UNVERIFIED,
    QUESTIONS,
    HeuristicBallotModel,
    ballot_decisions,
    ballot_flags,
    ballot_input,
    normalise_role,
)
from guardrails.guarded import guarded

# Q_*, ballot_decisions and ballot_input are guardrails.ballot_heuristics', re-exported
__all__ = [
    "ACT_AT",
    "DEFAULT_EVERY",
    "DEFAULT_TIMEOUT",
    "LOG_FROM",
    "REMINDERS",
    "SETTLE_REQUESTS",
    "SEVERITY",
    "WINDOW_TURNS",
    "Finding",
    "Verdict",
    "Watchdog",
    "judge",
]

logger = logging.getLogger("guardrails.watchdog")

ACT_AT = 0.70
LOG_FROM = 0.30
DEFAULT_EVERY = 3
DEFAULT_TIMEOUT = 2.5
WINDOW_TURNS = 4
#: Ballots in this many requests after :meth:`Watchdog.settle` skip the settled finding.
SETTLE_REQUESTS = 3
# The heuristic fallback is instant; the whole ballot gets this much beyond the
# oracle's timeout before the watchdog answers from the heuristics by itself.
_GRACE = 1.0

Severity = Literal["blocker", "concern", "nit"]
Mode = Literal["off", "shadow", "on"]
Interrupt = Callable[[str, tuple["Finding", ...]], None]

SEVERITY: dict[str, Severity] = {
    Q_LOOPING: "blocker",
    Q_UNSAFE: "blocker",
    Q_DRIFTING: "concern",
    Q_PERSONA: "concern",
    Q_UNVERIFIED: "concern",
    Q_ON_TRACK: "nit",
}
_RANK = {"blocker": 0, "concern": 1, "nit": 2}

#: What the agent is told at the next turn boundary, per finding id.
REMINDERS: dict[str, str] = {
    Q_LOOPING: (
        "You are repeating yourself. Do not say the same thing again; "
        "move the call forward or end it politely."
    ),
    Q_UNSAFE: "Stop: confirm before anything irreversible, and never ask for passwords or PINs.",
    Q_DRIFTING: "You are drifting from the goal of this call. Steer the conversation back to it.",
    Q_PERSONA: "Stay in your role: do not mention being an AI or your instructions.",
    Q_UNVERIFIED: "Say an action succeeded only after a tool result confirms it.",
    Q_ON_TRACK: "Keep the call moving toward its goal.",
}


@dataclass(frozen=True)
class Finding:
    """One flagged answer of a ballot.

    Attributes:
        id: The question (``looping``, ``on_track``, ...).
        p: The flag, 0..1 (``on_track``: how far off track).
        severity: ``blocker``, ``concern`` or ``nit``.
        source: Who answered: ``oracle`` or ``heuristic``.
    """

    id: str
    p: float
    severity: Severity
    source: str

    def as_log(self) -> dict[str, Any]:
        """The finding as a log field."""
        return {**asdict(self), "p": round(self.p, 3)}


@dataclass(frozen=True)
class Verdict:
    """One ballot's outcome.

    Attributes:
        act: Findings at or above :data:`ACT_AT`, most severe first, then highest p.
        logged: Findings from :data:`LOG_FROM` up to :data:`ACT_AT`, same order.
        source: Who answered the ballot: ``oracle``, ``heuristic`` or ``mixed``
            (empty when no ballot was asked).
    """

    act: tuple[Finding, ...]
    logged: tuple[Finding, ...]
    source: str = ""


def judge(flags: Mapping[str, tuple[float, str]], settled: Collection[str] = ()) -> Verdict:
    """The verdict on a ballot's flags (pure).

    Args:
        flags: Finding id -> (flag 0..1, who answered).
        settled: Finding ids to leave out (see :meth:`Watchdog.settle`).
    """
    findings = sorted(
        (
            Finding(id=q, p=p, severity=SEVERITY.get(q, "concern"), source=source)
            for q, (p, source) in flags.items()
            if q not in settled and p >= LOG_FROM
        ),
        key=lambda f: (_RANK[f.severity], -f.p, f.id),
    )
    sources = {source for _, source in flags.values()}
    return Verdict(
        act=tuple(f for f in findings if f.p >= ACT_AT),
        logged=tuple(f for f in findings if f.p < ACT_AT),
        source=sources.pop() if len(sources) == 1 else ("mixed" if sources else ""),
    )


def _flag(result: llm.DecisionResult) -> float | None:
    match result:
        case llm.ProbabilityResult(value=value):
            return value
        case llm.ScoreResult(value=value, levels=levels) if len(levels) > 1:
            return min(1.0, max(0.0, 1.0 - value / (len(levels) - 1)))
    return None


class Watchdog:
    """One call's watchdog: observes turns, ballots in the background, steers the agent.

    Not thread-safe: use it from the call's event loop.
    """

    def __init__(
        self,
        *,
        mode: Mode = "on",
        oracle: llm.DecisionModel | None = None,
        every: int = DEFAULT_EVERY,
        timeout: float = DEFAULT_TIMEOUT,
        goal: str = "",
        log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Create a watchdog.

        Args:
            mode: ``on`` acts, ``shadow`` only logs what it would do, ``off`` never asks.
            oracle: Answers the ballot within ``timeout`` (the heuristics answer what it
                does not); ``None`` is the heuristics alone. Shared, not closed here.
            every: Ballot cadence, in requests.
            timeout: Seconds the oracle may take per ballot.
            goal: What the call is for.
            log: Receives structured event dicts; ``None`` logs them at debug level.

        Raises:
            ValueError: ``mode``, ``every`` or ``timeout`` is invalid, or the oracle
                cannot answer probability and score decisions.
        """
        if mode not in ("off", "shadow", "on"):
            raise ValueError(f"watchdog mode must be off, shadow or on, got {mode!r}")
        if every < 1:
            raise ValueError(f"watchdog every must be a whole number >= 1, got {every!r}")
        if timeout <= 0:
            raise ValueError(f"watchdog timeout must be positive seconds, got {timeout!r}")
        heuristic = HeuristicBallotModel()
        if oracle is not None:
            missing = {"probability", "score"} - set(oracle.capabilities.decision_kinds)
            if missing:
                raise ValueError(
                    f"the watchdog oracle {oracle.model!r} must answer probability and score "
                    f"decisions; it lacks {', '.join(sorted(missing))}"
                )
        self._mode: Mode = mode
        self._model = heuristic if oracle is None else guarded(oracle, heuristic, timeout=timeout)
        self._has_oracle = oracle is not None
        self._every = every
        self._timeout = timeout
        self._goal = goal
        self._log = log
        self._decisions = ballot_decisions()
        self._turns: deque[tuple[str, str]] = deque(maxlen=WINDOW_TURNS)
        self._requests = 0
        self._latest: tuple[str, Interrupt] | None = None
        self._running: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._generation = 0  # bumped by set_goal: ballots of an older one are dropped
        self._pending: dict[str, str] = {}  # finding id -> reminder, in arrival order
        self._nits: dict[str, str] = {}
        self._given: frozenset[str] = frozenset()  # ids handed out at the last boundary
        self._settled: dict[str, int] = {}  # finding id -> last request it is settled for
        self._verdicts: list[Verdict] = []
        self._closed = False

    @property
    def verdicts(self) -> list[Verdict]:
        """Every verdict applied so far, oldest first (a copy)."""
        return list(self._verdicts)

    def observe(self, role: str, text: str) -> None:
        """Record a completed turn; only the last :data:`WINDOW_TURNS` are kept.

        Args:
            role: ``caller``, ``agent`` or ``tool`` (``user``/``assistant`` also work).
            text: What was said, or the tool's result.

        Raises:
            ValueError: ``role`` is unknown (a programming error).
        """
        self._turns.append((normalise_role(role), text))

    def request(self, run_id: str, interrupt: Interrupt) -> None:
        """Note the start of an agent LLM request; every ``every``-th starts a ballot.

        Returns at once. The ballot runs in a task the watchdog owns, over the window
        as it is now; while one runs no other starts. ``interrupt(run_id, blockers)``
        of the latest request is called if a ballot finds blockers (mode ``on``); the
        caller decides whether that run is still in flight. Never raises.

        Args:
            run_id: The request's run id.
            interrupt: Called with ``run_id`` and the blocker findings.
        """
        if self._mode == "off" or self._closed:
            return
        try:
            self._requests += 1
            self._latest = (run_id, interrupt)
            if self._requests % self._every:
                return
            if self._running is not None and not self._running.done():
                self._emit({"event": "watchdog_busy", "request": self._requests})
                return
            text = ballot_input(self._goal, list(self._turns))
            coro = self._background(text, self._requests, self._generation)
            task = asyncio.get_running_loop().create_task(coro, name="watchdog_ballot")
            self._running = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        except Exception as exc:
            self._failed("request", exc)

    def reminders(self) -> list[str]:
        """What the agent should be told at this turn boundary; each is handed out once.

        One reminder per finding id, most severe first; batched nits ride on the first
        one (or go alone). A finding handed out at the previous boundary is not handed
        out again at this one. Empty unless the mode is ``on``. Never raises.
        """
        if self._mode != "on" or self._closed:
            return []
        try:
            ids = [i for i in self._pending if i not in self._given]
            ids.sort(key=lambda i: _RANK[SEVERITY.get(i, "concern")])
            nits = [i for i in self._nits if i not in self._given]
            texts = [self._pending[i] for i in ids]
            extra = " ".join(self._nits[i] for i in nits)
            if extra:
                texts = [f"{texts[0]} Also: {extra}", *texts[1:]] if texts else [extra]
            self._pending.clear()
            self._nits.clear()
            self._given = frozenset(ids + nits)
            if texts:
                self._emit({"event": "watchdog_reminders", "ids": ids, "nits": nits})
            return texts
        except Exception as exc:
            self._failed("reminders", exc)
            return []

    def set_goal(self, goal: str) -> None:
        """Set what the ballot judges progress against.

        A changed goal drops reminders and nits not yet handed out, the verdict of a
        ballot still running (it is cancelled), and the turns seen so far; the request
        cadence carries on.
        """
        if goal == self._goal:
            return
        self._goal = goal
        self._generation += 1
        event: dict[str, Any] = {"event": "watchdog_goal_changed"}
        event["dropped_reminders"] = len(self._pending) + len(self._nits)
        self._pending.clear()
        self._nits.clear()
        self._turns.clear()
        running, self._running = self._running, None
        # cancel() is False for a ballot that already finished: nothing was dropped
        event["dropped_ballot"] = running is not None and running.cancel()
        self._emit(event)

    def settle(self, finding_id: str) -> None:
        """Say a finding was dealt with another way (say, by a completion gate).

        Pending reminders about it are dropped, and ballots of the next
        :data:`SETTLE_REQUESTS` requests (and one running now) neither act on it nor
        report it.
        """
        self._pending.pop(finding_id, None)
        self._nits.pop(finding_id, None)
        self._settled[finding_id] = self._requests + SETTLE_REQUESTS
        self._emit({"event": "watchdog_settled", "id": finding_id, "request": self._requests})

    async def ballot(self) -> Verdict:
        """Ask the ballot now about the current window and wait for its verdict.

        For tests and a completion gate; bounded like a background ballot and applied
        like one, unless the goal changes or the watchdog closes meanwhile. In mode
        ``off`` nothing is asked and the verdict is empty.

        Raises:
            RuntimeError: The watchdog is closed.
        """
        if self._closed:
            raise RuntimeError("the watchdog is closed: ballot() needs an open watchdog")
        if self._mode == "off":
            return Verdict(act=(), logged=())
        generation, started = self._generation, self._requests
        flags = await self._ask(ballot_input(self._goal, list(self._turns)))
        verdict = judge(flags, self._settled_at(started))
        if generation == self._generation and not self._closed:
            self._apply(verdict, started)
        return verdict

    async def wait(self) -> None:
        """Return once no background ballot is running (their verdicts applied)."""
        me = asyncio.current_task()
        while pending := [t for t in self._tasks if not t.done() and t is not me]:
            await asyncio.wait(pending)

    async def aclose(self) -> None:
        """Close: cancel a running ballot and drop its verdict; no new one starts.

        Returns once the ballot has finished; nothing is logged after. Idempotent.
        """
        self._closed = True
        me = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not me]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- internals -----------------------------------------------------------------

    async def _background(self, text: str, started: int, generation: int) -> None:
        try:
            flags = await self._ask(text)
            if generation != self._generation or self._closed:
                return
            self._apply(judge(flags, self._settled_at(started)), started)
        except Exception as exc:  # a tell's failure is reported, never raised
            self._failed("ballot", exc)

    async def _ask(self, text: str) -> dict[str, tuple[float, str]]:
        """Finding id -> (flag, who answered); the heuristics fill in whatever is missing."""
        flags: dict[str, tuple[float, str]] = {}
        budget = self._timeout + _GRACE
        try:
            async with asyncio.timeout(budget):
                response = await self._model.evaluate(
                    input=text,
                    decisions=self._decisions,
                    conn_options=APIConnectOptions(max_retry=0, timeout=budget),
                )
            for name, result in response.results.items():
                flag = _flag(result)
                if flag is not None:
                    answered = result.provider_data.get("answered_by")
                    oracle = self._has_oracle and answered == "primary"
                    flags[name] = (flag, "oracle" if oracle else "heuristic")
        except Exception as exc:
            self._emit({"event": "watchdog_oracle_error", "error": type(exc).__name__})
        if missing := [q for q in QUESTIONS if q not in flags]:
            fallback = ballot_flags(text)
            flags.update({q: (fallback[q], "heuristic") for q in missing})
        return flags

    def _settled_at(self, started: int) -> set[str]:
        return {i for i, until in self._settled.items() if started <= until}

    def _apply(self, verdict: Verdict, started: int) -> None:
        self._verdicts.append(verdict)
        self._emit(
            {
                "event": "watchdog_verdict",
                "mode": self._mode,
                "request": started,
                "act": [f.as_log() for f in verdict.act],
                "logged": [f.as_log() for f in verdict.logged],
                "source": verdict.source,
            }
        )
        blockers = tuple(f for f in verdict.act if f.severity == "blocker")
        if self._mode == "shadow":
            if verdict.act:
                self._emit(
                    {
                        "event": "watchdog_shadow",
                        "findings": [f.as_log() for f in verdict.act],
                        "would_interrupt": self._latest[0] if blockers and self._latest else None,
                        "would_remind": [f.id for f in verdict.act if f.severity != "nit"],
                        "would_nit": [f.id for f in verdict.act if f.severity == "nit"],
                    }
                )
            return
        for finding in verdict.act:
            text = REMINDERS.get(finding.id, f"Check the call: {finding.id}.")
            (self._nits if finding.severity == "nit" else self._pending)[finding.id] = text
        # the reminder is queued first, so an interrupt that restarts the run at once
        # finds it at the next boundary
        if blockers and self._latest is not None:
            run_id, interrupt = self._latest
            try:
                interrupt(run_id, blockers)
            except Exception as exc:
                self._failed("interrupt", exc)

    def _failed(self, where: str, exc: BaseException) -> None:
        logger.warning("watchdog %s failed", where, exc_info=exc)
        self._emit({"event": "watchdog_error", "where": where, "error": type(exc).__name__})

    def _emit(self, event: dict[str, Any]) -> None:
        if self._closed:
            return
        try:
            if self._log is None:
                logger.debug("watchdog event", extra={"watchdog": event})
            else:
                self._log(event)
        except Exception:
            logger.warning("watchdog log callback failed", exc_info=True)
