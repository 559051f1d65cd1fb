"""What a person watching a campaign sees: live progress, status tables, status JSON."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent.campaigns.dialer import DialerEvent
from agent.campaigns.records import CampaignSummary

__all__ = ["LiveProgress", "summary_json", "summary_table"]


def _rate_per_hour(summary: CampaignSummary) -> float | None:
    if summary.first_dial_at is None or summary.last_end_at is None:
        return None
    span = (summary.last_end_at - summary.first_dial_at).total_seconds()
    return summary.attempts / span * 3600 if span > 0 else None


def summary_json(summary: CampaignSummary) -> dict[str, Any]:
    """The summary as JSON-ready data (``campaign status --json``)."""
    rate = _rate_per_hour(summary)
    return {
        "name": summary.name,
        "status": summary.status,
        "created_at": summary.created_at.isoformat(),
        "contacts": {"total": summary.total_contacts, **summary.contacts},
        "results": summary.results,
        "attempts": summary.attempts,
        "in_flight": summary.in_flight,
        "dispositions": summary.dispositions,
        "first_dial_at": summary.first_dial_at.isoformat() if summary.first_dial_at else None,
        "last_end_at": summary.last_end_at.isoformat() if summary.last_end_at else None,
        "dials_per_hour": round(rate, 1) if rate is not None else None,
    }


def summary_table(summary: CampaignSummary) -> Table:
    """The summary as a table (``campaign status``)."""
    table = Table(title=f"campaign {summary.name}: {summary.status}", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("contacts", str(summary.total_contacts))
    for state in ("pending", "dialing", "done"):
        table.add_row(f"  {state}", str(summary.contacts.get(state, 0)))
    for result, n in sorted(summary.results.items()):
        table.add_row(f"    {result}", str(n))
    table.add_row("attempts", str(summary.attempts))
    table.add_row("  in flight", str(summary.in_flight))
    for disposition, n in sorted(summary.dispositions.items()):
        table.add_row(f"  {disposition}", str(n))
    return table


class LiveProgress:
    """Counts by disposition, calls in flight, rate and ETA, while a dialer runs.

    On a terminal it redraws in place; otherwise it prints one line every
    ``every`` seconds and one at the end (CI logs stay short). Rate and ETA are on
    the wall clock; with ``simulated`` (calls on simulated time) they say so, since
    the campaign's own pacing and windows run on the simulated clock.
    """

    def __init__(
        self,
        start: CampaignSummary,
        console: Console,
        *,
        every: float = 5.0,
        simulated: bool = False,
    ) -> None:
        self.console = console
        self.clock_note = " (wall clock; calls on simulated time)" if simulated else ""
        self.total = start.total_contacts
        self.done = start.contacts.get("done", 0)
        self.done_at_start = self.done
        self.dispositions: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.in_flight = 0
        self.dialed = 0
        self.status = start.status
        self.started = time.monotonic()
        self.every = every
        self._last_print = self.started
        self._live: Live | None = None
        self._last_line = ""

    def __enter__(self) -> LiveProgress:
        if self.console.is_terminal:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.__exit__(None, None, None)
        else:
            line = self.line()
            if line != self._last_line:
                self.console.print(line, highlight=False, soft_wrap=True, markup=False)

    def update(self, event: DialerEvent) -> None:
        match event.kind:
            case "dialed":
                self.dialed += 1
                self.in_flight = event.in_flight
            case "finished":
                self.in_flight = event.in_flight
                if event.disposition:
                    self.dispositions[event.disposition] += 1
                if event.result is not None:
                    self.done += 1
            case "skipped":
                self.done += 1
                if event.result:
                    self.skipped[event.result] += 1
            case "status":
                self.status = event.status or self.status
        if self._live is not None:
            self._live.update(self.render())
        elif time.monotonic() - self._last_print >= self.every:
            self._last_print = time.monotonic()
            self._last_line = self.line()
            self.console.print(self._last_line, highlight=False, soft_wrap=True, markup=False)

    def figures(self) -> tuple[float, float | None]:
        """(dials per minute, seconds to go) over this run so far, on the wall clock."""
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.dialed / elapsed * 60
        finished_rate = (self.done - self.done_at_start) / elapsed
        remaining = self.total - self.done
        eta = remaining / finished_rate if finished_rate > 0 else None
        return rate, eta

    def line(self) -> str:
        rate, eta = self.figures()
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.dispositions.items())) or "none yet"
        eta_text = f"{eta:.0f}s" if eta is not None else "-"
        return (
            f"[{self.status}] contacts {self.done}/{self.total} done, {self.in_flight} in flight, "
            f"dials {self.dialed} ({rate:.1f}/min), eta {eta_text}{self.clock_note}; {counts}"
        )

    def render(self) -> Group:
        rate, eta = self.figures()
        table = Table(show_header=True, header_style="bold")
        table.add_column("disposition")
        table.add_column("attempts", justify="right")
        for disposition, n in sorted(self.dispositions.items()):
            table.add_row(disposition, str(n))
        for result, n in sorted(self.skipped.items()):
            table.add_row(f"skipped: {result}", str(n))
        eta_text = f"{eta:.0f}s" if eta is not None else "-"
        head = Text(
            f"{self.status}: {self.done}/{self.total} contacts done · {self.in_flight} in flight"
            f" · {rate:.1f} dials/min · ETA {eta_text}{self.clock_note}"
        )
        return Group(head, table)
