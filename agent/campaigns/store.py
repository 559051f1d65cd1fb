"""The durable campaign store: SQLAlchemy 2 async on SQLite (default) or PostgreSQL.

:class:`CampaignStore` opens the database (migrating its schema with Alembic,
``migrations/``), creates campaigns with their contacts and do-not-call
entries, changes their status, and reads summaries and attempt records for
``status`` and ``report``. What dialers do to it (leases, attempts, calls,
recovery) is :class:`~.leasing.Leasing`, part of the same class.

Every method is one short transaction. All times are passed in by the caller
(the campaign clock), never read from the database server, so a simulated
campaign can run on simulated time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import event, func, insert, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from agent.campaigns.leasing import CallRecord, Claimed, ClaimedContact, Finished, Leasing, _aware
from agent.campaigns.records import AttemptRecord, CampaignSummary
from agent.campaigns.schema import attempts, calls, campaigns, contacts, dnc
from agent.core.clock import hold_clock

logger = logging.getLogger("agent.campaigns.store")

__all__ = [
    "DB_ENV",
    "CampaignNotFound",
    "CampaignExists",
    "CampaignRow",
    "Claimed",
    "Finished",
    "ClaimedContact",
    "CallRecord",
    "CampaignStore",
    "StoreError",
    "StoreMissing",
    "async_url",
    "default_db_url",
]

DB_ENV = "CALLRT_DB_URL"
MIGRATIONS = Path(__file__).parent / "migrations"
STATUSES = ("ready", "running", "paused", "cancelled", "done")


class StoreError(RuntimeError):
    """The store cannot be opened or used; the message is one line."""


class CampaignNotFound(StoreError):
    """No campaign has that name."""


class CampaignExists(StoreError):
    """A campaign with that name already exists."""


class StoreMissing(StoreError):
    """``open(create=False)`` found no SQLite file at the URL's path."""


def default_db_url() -> str:
    """The default store: a SQLite file ``runs/campaigns.db`` under the working folder."""
    return f"sqlite:///{Path('runs') / 'campaigns.db'}"


def async_url(url: str) -> str:
    """``url`` with the async driver SQLAlchemy needs (``aiosqlite``, ``asyncpg``).

    Raises:
        StoreError: not a SQLite or PostgreSQL URL.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"expected a database URL like sqlite:///runs/campaigns.db or "
            f"postgresql://user:pass@host/db, got {url!r}"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif backend in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    else:
        raise StoreError(f"expected a sqlite:// or postgresql:// database URL, got {backend}://")
    return parsed.render_as_string(hide_password=False)


class ContactLike(Protocol):
    """What :meth:`CampaignStore.create_campaign` reads of a contact."""

    @property
    def line(self) -> int: ...
    @property
    def number(self) -> str: ...
    @property
    def zones(self) -> tuple[str, ...]: ...
    @property
    def priority(self) -> int: ...
    @property
    def variables(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class CampaignRow:
    id: int
    name: str
    status: str
    spec: dict[str, Any]
    source: dict[str, Any]
    created_at: datetime


class CampaignStore(Leasing):
    """Campaigns, contacts, attempts, calls, events and do-not-call lists.

    Open with :meth:`open` (which migrates the schema to the newest version) and
    close with :meth:`aclose`. ``statements`` counts the SQL statements sent, for
    benchmarks.
    """

    def __init__(self, engine: AsyncEngine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.statements = 0
        self.is_postgres = engine.dialect.name == "postgresql"

        def _count(*_: Any) -> None:
            self.statements += 1

        event.listen(engine.sync_engine, "before_cursor_execute", _count)

    @classmethod
    async def open(cls, url: str, *, create: bool = True) -> CampaignStore:
        """Connect to ``url`` (any driver spelling) and migrate the schema.

        Args:
            url: The store's URL.
            create: Create a SQLite file (and its folder) that does not exist yet;
                commands that only read or change existing campaigns pass False.

        Raises:
            StoreMissing: ``create`` is False and the SQLite file does not exist.
            StoreError: a bad URL, or the database cannot be reached or migrated.
        """
        target = async_url(url)
        parsed = make_url(target)
        kwargs: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            db = parsed.database or ""
            if db and db != ":memory:" and not db.startswith("file:"):
                _prepare_sqlite_file(Path(db), create=create)
            kwargs["connect_args"] = {"timeout": 30}
        else:
            kwargs["pool_size"] = 5
        # every use is `engine.begin()`: committed or rolled back already on return
        engine = create_async_engine(target, pool_reset_on_return=None, **kwargs)
        if parsed.get_backend_name() == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        store = cls(engine, parsed.render_as_string(hide_password=True))
        try:
            with hold_clock():
                async with engine.begin() as conn:
                    if store.is_postgres:
                        # two dialers starting together must not migrate at once
                        await conn.exec_driver_sql("SELECT pg_advisory_xact_lock(727001)")
                    if await conn.run_sync(_current_revision) != _head_revision():
                        await conn.run_sync(_upgrade)
        except (SQLAlchemyError, OSError) as exc:
            await engine.dispose()
            raise StoreError(
                f"{store.url}: cannot open the campaign store: {_brief(exc)}"
            ) from None
        return store

    async def aclose(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        with hold_clock():
            try:
                async with self.engine.begin() as conn:
                    yield conn
            except (SQLAlchemyError, OSError) as exc:
                if isinstance(exc, IntegrityError):
                    raise
                raise StoreError(f"{self.url}: {_brief(exc)}") from exc

    # -- campaigns -------------------------------------------------------------------

    async def create_campaign(
        self,
        name: str,
        spec: dict[str, Any],
        contact_list: Iterable[ContactLike],
        *,
        source: dict[str, Any],
        now: datetime,
        dnc_numbers: Iterable[str] = (),
        dnc_prefixes: Iterable[str] = (),
    ) -> int:
        """Create a campaign with its contacts (all due now) and its own DNC entries."""
        rows = list(contact_list)
        try:
            async with self._tx() as conn:
                cid = (
                    await conn.execute(
                        insert(campaigns)
                        .values(
                            name=name,
                            status="ready",
                            spec=spec,
                            source=source,
                            created_at=now,
                            updated_at=now,
                        )
                        .returning(campaigns.c.id)
                    )
                ).scalar_one()
                if rows:
                    await conn.execute(
                        insert(contacts),
                        [
                            {
                                "campaign_id": cid,
                                "line": c.line,
                                "number": c.number,
                                "zones": list(c.zones),
                                "variables": dict(c.variables),
                                "priority": c.priority,
                                "state": "pending",
                                "attempts": 0,
                                "next_at": now,
                                "updated_at": now,
                            }
                            for c in rows
                        ],
                    )
                entries = [("number", v) for v in sorted(set(dnc_numbers))]
                entries += [("prefix", v) for v in sorted(set(dnc_prefixes))]
                if entries:
                    await conn.execute(
                        insert(dnc),
                        [
                            {"campaign_id": cid, "kind": k, "value": v, "added_at": now}
                            for k, v in entries
                        ],
                    )
                await self._event(conn, cid, None, now, "created", {"contacts": len(rows)})
        except IntegrityError:
            raise CampaignExists(f"campaign {name!r} already exists") from None
        return int(cid)

    async def campaign(self, name: str) -> CampaignRow:
        async with self._tx() as conn:
            row = (await conn.execute(select(campaigns).where(campaigns.c.name == name))).first()
        if row is None:
            raise CampaignNotFound(f"no campaign named {name!r}")
        return CampaignRow(row.id, row.name, row.status, row.spec, row.source, row.created_at)

    async def list_campaigns(self) -> list[CampaignRow]:
        async with self._tx() as conn:
            result = await conn.execute(select(campaigns).order_by(campaigns.c.id))
            return [
                CampaignRow(r.id, r.name, r.status, r.spec, r.source, r.created_at) for r in result
            ]

    async def status(self, campaign_id: int) -> str:
        async with self._tx() as conn:
            value = (
                await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
            ).scalar_one()
        return str(value)

    async def set_status(
        self, campaign_id: int, status: str, *, now: datetime, allowed_from: Sequence[str]
    ) -> str | None:
        """Move the campaign to ``status`` if it is in one of ``allowed_from``.

        Returns:
            The status it had (None when it was not in ``allowed_from`` and nothing changed).
        """
        async with self._tx() as conn:
            current = (
                await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
            ).scalar_one()
            if current not in allowed_from:
                return None
            await conn.execute(
                update(campaigns)
                .where(campaigns.c.id == campaign_id, campaigns.c.status == current)
                .values(status=status, updated_at=now)
            )
            await self._event(conn, campaign_id, None, now, status, {"from": current})
        return str(current)

    # -- the dialer's operations ------------------------------------------------------

    # -- do-not-call ------------------------------------------------------------------

    async def add_dnc(
        self, kind: str, value: str, *, now: datetime, campaign_id: int | None = None
    ) -> bool:
        """Add a number or prefix; False when it was already listed."""
        try:
            async with self._tx() as conn:
                exists = (
                    await conn.execute(
                        select(dnc.c.id).where(
                            dnc.c.kind == kind,
                            dnc.c.value == value,
                            dnc.c.campaign_id.is_(None)
                            if campaign_id is None
                            else dnc.c.campaign_id == campaign_id,
                        )
                    )
                ).first()
                if exists is not None:
                    return False
                await conn.execute(
                    insert(dnc).values(
                        campaign_id=campaign_id, kind=kind, value=value, added_at=now
                    )
                )
        except IntegrityError:
            return False
        return True

    async def remove_dnc(self, kind: str, value: str, *, campaign_id: int | None = None) -> bool:
        async with self._tx() as conn:
            done = await conn.execute(
                dnc.delete().where(
                    dnc.c.kind == kind,
                    dnc.c.value == value,
                    dnc.c.campaign_id.is_(None)
                    if campaign_id is None
                    else dnc.c.campaign_id == campaign_id,
                )
            )
        return bool(done.rowcount)

    async def list_dnc(self, campaign_id: int | None = None) -> list[tuple[str, str]]:
        async with self._tx() as conn:
            rows = await conn.execute(
                select(dnc.c.kind, dnc.c.value)
                .where(
                    dnc.c.campaign_id.is_(None)
                    if campaign_id is None
                    else dnc.c.campaign_id == campaign_id
                )
                .order_by(dnc.c.kind, dnc.c.value)
            )
            return [(r.kind, r.value) for r in rows]

    # -- reading ---------------------------------------------------------------------

    async def summary(self, name: str) -> CampaignSummary:
        row = await self.campaign(name)
        async with self._tx() as conn:
            states: dict[Any, Any] = dict(
                (
                    await conn.execute(
                        select(contacts.c.state, func.count())
                        .where(contacts.c.campaign_id == row.id)
                        .group_by(contacts.c.state)
                    )
                ).all()
            )
            results: dict[Any, Any] = dict(
                (
                    await conn.execute(
                        select(contacts.c.result, func.count())
                        .where(contacts.c.campaign_id == row.id, contacts.c.state == "done")
                        .group_by(contacts.c.result)
                    )
                ).all()
            )
            by_status: dict[Any, Any] = dict(
                (
                    await conn.execute(
                        select(attempts.c.status, func.count())
                        .where(attempts.c.campaign_id == row.id)
                        .group_by(attempts.c.status)
                    )
                ).all()
            )
            dispositions: dict[Any, Any] = dict(
                (
                    await conn.execute(
                        select(attempts.c.disposition, func.count())
                        .where(attempts.c.campaign_id == row.id, attempts.c.status == "done")
                        .group_by(attempts.c.disposition)
                    )
                ).all()
            )
            span = (
                await conn.execute(
                    select(func.min(attempts.c.started_at), func.max(attempts.c.ended_at)).where(
                        attempts.c.campaign_id == row.id
                    )
                )
            ).one()
        return CampaignSummary(
            name=row.name,
            status=row.status,
            created_at=row.created_at,
            total_contacts=sum(states.values()),
            contacts={str(k): int(v) for k, v in states.items()},
            results={str(k): int(v) for k, v in results.items()},
            dispositions={str(k): int(v) for k, v in dispositions.items()},
            attempts=sum(by_status.values()),
            in_flight=int(by_status.get("dialing", 0)),
            first_dial_at=_aware(span[0]) if span[0] is not None else None,
            last_end_at=_aware(span[1]) if span[1] is not None else None,
        )

    async def attempt_records(self, campaign_id: int) -> list[AttemptRecord]:
        async with self._tx() as conn:
            rows = await conn.execute(
                select(
                    attempts,
                    contacts.c.line,
                    contacts.c.number,
                    calls.c.voicemail_left,
                    calls.c.amd_category,
                    calls.c.duration,
                    calls.c.call_id,
                    calls.c.transcript_path,
                    calls.c.recording_path,
                )
                .join(contacts, contacts.c.id == attempts.c.contact_id)
                .outerjoin(calls, calls.c.attempt_id == attempts.c.id)
                .where(attempts.c.campaign_id == campaign_id)
                .order_by(attempts.c.started_at, attempts.c.id)
            )
            return [
                AttemptRecord(
                    attempt_id=r.id,
                    contact_id=r.contact_id,
                    contact_line=r.line,
                    number=r.number,
                    attempt_no=r.attempt_no,
                    dialer=r.dialer,
                    started_at=r.started_at,
                    ended_at=r.ended_at,
                    status=r.status,
                    disposition=r.disposition,
                    voicemail_left=bool(r.voicemail_left),
                    amd_category=r.amd_category,
                    duration=r.duration,
                    call_id=r.call_id,
                    transcript_path=r.transcript_path,
                    recording_path=r.recording_path,
                )
                for r in rows
            ]


def _prepare_sqlite_file(path: Path, *, create: bool) -> None:
    """Make the file's folder, or (``create`` False) insist that the file exists."""
    if not create and not path.is_file():
        raise StoreMissing(f"no campaign store at {path.resolve()}")
    path.parent.mkdir(parents=True, exist_ok=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets `campaign status` read while a dialer writes
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@functools.cache
def _head_revision() -> str | None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def _current_revision(sync_conn: Any) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(sync_conn).get_current_revision()


def _upgrade(sync_conn: Any) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = sync_conn
    command.upgrade(cfg, "head")


def _brief(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first[:200]
