"""The demo campaign ``make demo`` runs: the bundled contacts, simulated calls, a report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from agent.campaigns.definition import load_campaign, load_contacts
from agent.campaigns.report import write_report
from agent.campaigns.runner import StartOptions, run_start
from agent.campaigns.store import CampaignStore
from agent.core import clock

__all__ = ["DEMO_CAMPAIGN", "run_demo_campaign"]

PROJECT = Path(__file__).resolve().parents[2]
DEMO_CAMPAIGN = PROJECT / "configs" / "campaigns" / "demo.yaml"
DEMO_CONTACTS = PROJECT / "configs" / "campaigns" / "demo-contacts.csv"


def run_demo_campaign(run_dir: Path, console: Console) -> tuple[int, Path]:
    """Create the demo campaign in ``run_dir/campaigns.db``, run it, write its report.

    Calls are recorded calls (a seeded mix of the bundled suites) replayed as
    text through the real actors and the default local models, on simulated
    campaign time. Returns (exit status, the report's HTML path).
    """
    db = f"sqlite:///{run_dir / 'campaigns.db'}"
    name = "demo"
    spec = load_campaign(DEMO_CAMPAIGN)
    contacts = load_contacts(
        DEMO_CONTACTS, default_timezone=spec.timezone, default_priority=spec.priority
    )
    for warning in contacts.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)

    async def create() -> None:
        store = await CampaignStore.open(db)
        try:
            await store.create_campaign(
                name,
                spec.to_json(),
                contacts.contacts,
                source={"config": str(DEMO_CAMPAIGN), "contacts": str(DEMO_CONTACTS)},
                now=datetime.now(UTC),
                dnc_numbers=spec.dnc.numbers,
                dnc_prefixes=spec.dnc.prefixes,
            )
        finally:
            await store.aclose()

    clock.run(create())
    code = run_start(
        StartOptions(
            name=name,
            db=db,
            mode="suites",
            suites=[PROJECT / "configs" / "demo", PROJECT / "tests" / "calls" / "amd"],
            out=run_dir / "campaign",
        ),
        console=console,
    )

    async def report() -> Path:
        store = await CampaignStore.open(db)
        try:
            row = await store.campaign(name)
            summary = await store.summary(name)
            records = await store.attempt_records(row.id)
        finally:
            await store.aclose()
        return write_report(run_dir / "campaign-report", summary, records)[1]

    return code, clock.run(report())
