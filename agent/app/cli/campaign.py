"""``python -m agent campaign ...``: create, start, pause, resume, cancel, status, report.

Every command takes ``--db URL`` (or ``CALLRT_DB_URL``); the default store is
the SQLite file ``runs/campaigns.db`` in the working folder. Only ``create`` and
``dnc add`` make a store that does not exist; the other commands say "no campaign
store at PATH". A relative SQLite path is printed resolved. Bad input (files,
names, URLs, states) exits 2 with one line naming what was wrong.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from agent.app.cli.style import CallrtTyper
from agent.campaigns.location import StoreLocation, default_store_help, locate
from agent.campaigns.store import StoreError, StoreMissing

T = TypeVar("T")

campaign_app = CallrtTyper(
    help="Outbound campaigns: durable, resumable, paced dialling of a contact list.",
    no_args_is_help=True,
)
err = Console(stderr=True, soft_wrap=True)

# no envvar= here: locate() reads CALLRT_DB_URL itself, so messages name the source
_DB = typer.Option("--db", help=default_store_help())
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
PROJECT = Path(__file__).resolve().parents[3]


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(2)


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise _fail(f"NAME: expected letters, digits, '.', '_' or '-' (at most 100), got {name!r}")
    return name


def _locate(db: str | None, *, create: bool) -> StoreLocation:
    """Where the store is; prints the resolved file when the URL's path was relative."""
    try:
        location = locate(db)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    note = location.note()
    if note is not None and (create or (location.path is not None and location.path.is_file())):
        err.print(f"[{note}]", markup=False, highlight=False)
    return location


def _store_error(location: StoreLocation, exc: StoreError) -> typer.Exit:
    if isinstance(exc, StoreMissing):
        return _fail(location.missing())
    return _fail(f"{'--db' if location.source == 'default' else location.source}: {exc}")


def _run(
    db: str | None,
    work: Callable[[Any], Awaitable[T]],
    *,
    virtual: bool = False,
    create: bool = False,
) -> T:
    """Open the store, run ``work(store)``, close it; store problems exit 2.

    Only ``create`` makes a store that does not exist yet.
    """
    from agent.campaigns.store import CampaignExists, CampaignNotFound, CampaignStore
    from agent.core import clock

    location = _locate(db, create=create)

    async def main() -> T:
        store = await CampaignStore.open(location.url, create=create)
        try:
            return await work(store)
        finally:
            await store.aclose()

    try:
        return clock.run(main(), virtual=virtual)
    except (CampaignNotFound, CampaignExists) as exc:
        raise _fail(f"NAME: {exc}") from None
    except StoreError as exc:
        raise _store_error(location, exc) from None


@campaign_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="the campaign's name")],
    config: Annotated[Path, typer.Option("--config", help="campaign YAML")],
    contacts: Annotated[Path, typer.Option("--contacts", help="contacts CSV")],
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Create a campaign from its YAML and contacts CSV (validated; duplicates merged)."""
    from agent.campaigns.definition import CampaignDefinitionError, load_campaign, load_contacts

    _check_name(name)
    try:
        spec = load_campaign(config)
        loaded = load_contacts(
            contacts, default_timezone=spec.timezone, default_priority=spec.priority
        )
    except CampaignDefinitionError as exc:
        raise _fail(str(exc)) from None
    if spec.agent is not None:
        from agent.app.config import ConfigError, load_config

        try:
            load_config(spec.agent)
        except ConfigError as exc:
            raise _fail(f"{config}: agent: {exc}") from None
    for warning in loaded.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)

    async def work(store: Any) -> int:
        return int(
            await store.create_campaign(
                name,
                spec.to_json(),
                loaded.contacts,
                source={"config": str(config.resolve()), "contacts": str(contacts.resolve())},
                now=datetime.now(UTC),
                dnc_numbers=spec.dnc.numbers,
                dnc_prefixes=spec.dnc.prefixes,
            )
        )

    _run(db, work, create=True)
    print(f"created campaign {name}: {len(loaded.contacts)} contacts", flush=True)


def _parse_simulate(value: str | None, livekit: bool) -> str:
    if livekit and value is not None:
        raise _fail("--simulate and --livekit: choose one way to place the calls")
    if livekit:
        return "livekit"
    if value is None:
        return "suites"
    if value == "instant":
        return "instant"
    path = Path(value)
    if not path.is_dir():
        raise _fail(f"--simulate: expected a folder of recorded calls or 'instant', got {value!r}")
    return "folder"


@campaign_app.command("start")
def start(
    name: Annotated[str, typer.Argument(help="the campaign to run")],
    simulate: Annotated[
        str | None,
        typer.Option(
            "--simulate",
            help="map contacts to the recorded calls in this folder, or 'instant' "
            "(no call runs; seeded dispositions). Default: a seeded mix of the bundled suites",
        ),
    ] = None,
    livekit: Annotated[
        bool, typer.Option("--livekit", help="place real calls through LiveKit (LIVEKIT_* env)")
    ] = False,
    audio: Annotated[
        bool, typer.Option("--audio", help="simulate calls with audio (slower) instead of text")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the simulated mix")] = 0,
    real_clock: Annotated[
        bool,
        typer.Option(
            "--real-clock", help="simulate on the wall clock (default: simulated time, fast)"
        ),
    ] = False,
    sim_seconds: Annotated[
        float, typer.Option("--sim-seconds", help="length of each 'instant' call, seconds")
    ] = 0.0,
    out: Annotated[
        Path | None,
        typer.Option(help="where transcripts and recordings go (default runs/campaigns/NAME)"),
    ] = None,
    dial_log: Annotated[
        Path | None, typer.Option("--dial-log", help="append one line per dial placed")
    ] = None,
    dialer_id: Annotated[
        str | None, typer.Option("--dialer-id", help="this dialer's name in leases")
    ] = None,
    db: Annotated[str | None, _DB] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Run the campaign until every contact is done (resumes where any earlier run stopped)."""
    from agent.app.logs import setup_logging
    from agent.campaigns.runner import StartOptions, run_start

    setup_logging(verbose=verbose, json_logs=False)
    location = _locate(db, create=False)
    mode = _parse_simulate(simulate, livekit)
    if sim_seconds < 0:
        raise _fail(f"--sim-seconds: expected a number of seconds >= 0, got {sim_seconds}")
    if dialer_id is not None and not 0 < len(dialer_id) <= 100:
        raise _fail("--dialer-id: expected 1 to 100 characters")
    options = StartOptions(
        name=_check_name(name),
        mode=mode,
        folder=Path(simulate) if mode == "folder" and simulate else None,
        suites=[PROJECT / "configs" / "demo", PROJECT / "tests" / "calls" / "amd"],
        text_only=not audio,
        seed=seed,
        simulated_time=mode != "livekit" and not real_clock,
        sim_seconds=sim_seconds,
        out=out or Path("runs") / "campaigns" / name,
        dial_log=dial_log,
        dialer_id=dialer_id,
        db=location.url,
    )
    from agent.campaigns.store import CampaignNotFound

    try:
        code = run_start(options, console=err)
    except CampaignNotFound as exc:
        raise _fail(f"NAME: {exc}") from None
    except StoreError as exc:
        raise _store_error(location, exc) from None
    except ValueError as exc:  # bad input found while setting up (calls, config, env)
        raise _fail(str(exc)) from None
    raise typer.Exit(code)


def _transition(name: str, db: str | None, status: str, allowed: tuple[str, ...]) -> None:
    _check_name(name)

    async def work(store: Any) -> tuple[str | None, str]:
        row = await store.campaign(name)
        before = await store.set_status(row.id, status, now=datetime.now(UTC), allowed_from=allowed)
        return before, row.status

    before, current = _run(db, work)
    if before is None:
        verb = {"paused": "pause", "running": "resume"}.get(status, status)
        raise _fail(f"NAME: campaign {name!r} is {current}; cannot {verb} it")
    print(f"campaign {name}: {before} -> {status}", flush=True)


@campaign_app.command("pause")
def pause(name: str, db: Annotated[str | None, _DB] = None) -> None:
    """Stop placing new calls (calls in flight finish); running dialers wait."""
    _transition(name, db, "paused", ("ready", "running"))


@campaign_app.command("resume")
def resume(name: str, db: Annotated[str | None, _DB] = None) -> None:
    """Let a paused campaign's dialers place calls again."""
    _transition(name, db, "running", ("paused",))


@campaign_app.command("cancel")
def cancel(name: str, db: Annotated[str | None, _DB] = None) -> None:
    """End the campaign: no new calls; contacts still waiting end as 'cancelled'."""
    _check_name(name)

    async def work(store: Any) -> tuple[str | None, str]:
        row = await store.campaign(name)
        now = datetime.now(UTC)
        before = await store.set_status(
            row.id, "cancelled", now=now, allowed_from=("ready", "running", "paused")
        )
        if before is not None:
            await store.cancel_pending(row.id, now=now)
        return before, row.status

    before, current = _run(db, work)
    if before is None:
        raise _fail(f"NAME: campaign {name!r} is {current}; cannot cancel")
    print(f"campaign {name}: {before} -> cancelled", flush=True)


@campaign_app.command("status")
def status(
    name: str,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Show the campaign's progress: contacts by state and result, dispositions, in flight."""
    from agent.campaigns.progress import summary_json, summary_table

    _check_name(name)
    summary = _run(db, lambda store: store.summary(name))
    if json_out:
        print(json.dumps(summary_json(summary), indent=2))
    else:
        Console().print(summary_table(summary))


@campaign_app.command("report")
def report(
    name: str,
    out: Annotated[Path, typer.Option("--out", help="folder for attempts.csv and report.html")],
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Write a CSV of every attempt and an HTML page with charts."""
    from agent.campaigns.report import write_report

    _check_name(name)

    async def work(store: Any) -> tuple[Any, Any]:
        row = await store.campaign(name)
        return await store.summary(name), await store.attempt_records(row.id)

    summary, records = _run(db, work)
    if out.exists() and not out.is_dir():
        raise _fail(f"--out: {out} is a file; expected a folder")
    try:
        csv_path, html_path = write_report(out, summary, records)
    except OSError as exc:
        raise _fail(f"--out: cannot write the report: {exc.strerror or exc}") from None
    print(f"{csv_path}\n{html_path}", flush=True)


@campaign_app.command("list")
def list_campaigns(db: Annotated[str | None, _DB] = None) -> None:
    """List the campaigns in the store."""
    rows = _run(db, lambda store: store.list_campaigns())
    for row in rows:
        print(f"{row.name}\t{row.status}\t{row.created_at.isoformat()}")


dnc_app = CallrtTyper(
    help="The do-not-call lists: global, or one campaign's (--campaign). "
    "A value is an E.164 number, or a prefix ending in '*' (+1900*).",
    no_args_is_help=True,
)
campaign_app.add_typer(dnc_app, name="dnc")


def _dnc_value(value: str) -> tuple[str, str]:
    from agent.telephony.phone import PhoneNumberError, parse_e164

    if value.endswith("*"):
        digits = value[:-1]
        if not re.fullmatch(r"\+[1-9][0-9]{0,14}", digits):
            raise _fail(f"VALUE: expected a prefix like +1900*, got {value!r}")
        return "prefix", digits
    try:
        return "number", parse_e164(value)
    except PhoneNumberError as exc:
        raise _fail(f"VALUE: {exc}") from None


def _dnc_change(value: str, campaign: str | None, db: str | None, add: bool) -> None:
    kind, canonical = _dnc_value(value)

    async def work(store: Any) -> bool:
        cid = (await store.campaign(_check_name(campaign))).id if campaign else None
        if add:
            return bool(
                await store.add_dnc(kind, canonical, now=datetime.now(UTC), campaign_id=cid)
            )
        return bool(await store.remove_dnc(kind, canonical, campaign_id=cid))

    changed = _run(db, work, create=add)
    scope = f"campaign {campaign}" if campaign else "global"
    verb = (
        ("added to" if changed else "already on")
        if add
        else ("removed from" if changed else "not on")
    )
    print(f"{kind} {verb} the {scope} do-not-call list", flush=True)


@dnc_app.command("add")
def dnc_add(
    value: str,
    campaign: Annotated[str | None, typer.Option(help="this campaign's list")] = None,
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Add a number or prefix; running dialers check it before their next dial."""
    _dnc_change(value, campaign, db, add=True)


@dnc_app.command("remove")
def dnc_remove(
    value: str,
    campaign: Annotated[str | None, typer.Option(help="this campaign's list")] = None,
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Remove a number or prefix."""
    _dnc_change(value, campaign, db, add=False)


@dnc_app.command("list")
def dnc_list(
    campaign: Annotated[str | None, typer.Option(help="this campaign's list")] = None,
    db: Annotated[str | None, _DB] = None,
) -> None:
    """Print the list, one entry per line."""

    async def work(store: Any) -> list[tuple[str, str]]:
        cid = (await store.campaign(_check_name(campaign))).id if campaign else None
        return list(await store.list_dnc(cid))

    for kind, value in _run(db, work):
        print(value + ("*" if kind == "prefix" else ""))


def install_signal_stop(stop: Callable[[], None]) -> None:
    """First Ctrl-C: stop placing calls and let those in flight finish. Second: exit now."""
    loop = asyncio.get_running_loop()
    presses = {"n": 0}

    def on_signal() -> None:
        presses["n"] += 1
        if presses["n"] == 1:
            err.print("[stopping: no new calls; waiting for the calls in flight]", markup=False)
            stop()
        else:
            sys.exit(130)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
