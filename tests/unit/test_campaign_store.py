"""The campaign store itself: URLs, migrations, times, and the claim's guards."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from agent.campaigns.schema import metadata
from agent.campaigns.store import CampaignStore, StoreError, async_url
from agent.core import clock


@dataclass(frozen=True)
class _Contact:
    line: int
    number: str
    zones: tuple[str, ...] = ("America/New_York",)
    priority: int = 0
    variables: dict[str, str] | None = None


def _contacts(n: int) -> list[_Contact]:
    return [_Contact(i + 2, f"+1555010{i:04d}", variables={}) for i in range(n)]  # type: ignore[arg-type]


def test_urls_get_their_async_driver_and_other_databases_are_refused() -> None:
    assert async_url("sqlite:///runs/c.db").startswith("sqlite+aiosqlite:///")
    assert async_url("postgresql://u:p@h/db").startswith("postgresql+asyncpg://u:p@h/db")
    assert async_url("postgres://u:p@h/db").startswith("postgresql+asyncpg://")
    with pytest.raises(StoreError, match="sqlite:// or postgresql://"):
        async_url("mysql://u:p@h/db")
    with pytest.raises(StoreError, match="expected a database URL"):
        async_url("not a url")


def test_an_unreachable_database_is_one_line_naming_it_without_the_password() -> None:
    async def main() -> None:
        await CampaignStore.open("postgresql://callrt:s3cret@127.0.0.1:1/nowhere")

    with pytest.raises(StoreError) as info:
        clock.run(main())
    message = str(info.value)
    assert "\n" not in message and "127.0.0.1:1/nowhere" in message
    assert "s3cret" not in message


def test_migrations_build_exactly_the_schema_the_code_uses(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    async def main() -> tuple[list[object], str | None]:
        store = await CampaignStore.open(db_url)
        await store.aclose()
        store = await CampaignStore.open(db_url)  # a second open finds it current
        try:
            async with store.engine.connect() as conn:

                def compare(sync_conn: object) -> tuple[list[object], str | None]:
                    context = MigrationContext.configure(sync_conn)  # type: ignore[arg-type]
                    return compare_metadata(context, metadata), context.get_current_revision()

                return await conn.run_sync(compare)
        finally:
            await store.aclose()

    diff, revision = clock.run(main())
    # types differ only in spelling (DateTime vs the UTC decorator), never in tables,
    # columns, indexes or constraints
    assert [d for d in diff if not (isinstance(d, list) and d[0][0] == "modify_type")] == []
    assert revision == "0001"


def test_times_come_back_as_the_same_aware_utc_instant(db_url: str) -> None:
    async def main() -> tuple[datetime, datetime | None]:
        store = await CampaignStore.open(db_url)
        try:
            berlin = datetime(2026, 3, 29, 3, 30, tzinfo=UTC) + timedelta(hours=2)
            await store.create_campaign("t", {}, _contacts(1), source={}, now=berlin)
            row = await store.campaign("t")
            _, _, due, _ = await store.outlook(row.id)
            return row.created_at, due
        finally:
            await store.aclose()

    created, due = clock.run(main())
    assert created == datetime(2026, 3, 29, 5, 30, tzinfo=UTC)
    assert created.tzinfo is not None and due == created


def test_a_contact_leased_by_one_dialer_cannot_be_claimed_by_another(db_url: str) -> None:
    async def main() -> tuple[int, int, int]:
        store = await CampaignStore.open(db_url)
        try:
            now = datetime(2026, 6, 1, 15, tzinfo=UTC)
            cid = await store.create_campaign("t", {}, _contacts(3), source={}, now=now)
            await store.set_status(cid, "running", now=now, allowed_from=("ready",))

            def opens(_zones: tuple[str, ...]) -> datetime:
                return now

            a = await store.claim_attempts(cid, "a", now=now, limit=2, lease=30, opens=opens)
            b = await store.claim_attempts(cid, "b", now=now, limit=5, lease=30, opens=opens)
            # b's lease expires only after 30 s; until then a's contacts stay a's
            c = await store.claim_attempts(
                cid, "c", now=now + timedelta(seconds=29), limit=5, lease=30, opens=opens
            )
            return len(a.dial), len(b.dial), len(c.dial)
        finally:
            await store.aclose()

    assert clock.run(main()) == (2, 1, 0)


def test_a_paused_campaign_leases_nothing_even_to_a_dialer_that_missed_the_pause(
    db_url: str,
) -> None:
    async def main() -> int:
        store = await CampaignStore.open(db_url)
        try:
            now = datetime(2026, 6, 1, 15, tzinfo=UTC)
            cid = await store.create_campaign("t", {}, _contacts(2), source={}, now=now)
            await store.set_status(cid, "paused", now=now, allowed_from=("ready",))
            got = await store.claim_attempts(
                cid, "a", now=now, limit=5, lease=30, opens=lambda _z: now
            )
            async with store.engine.connect() as conn:
                attempts = (await conn.execute(text("SELECT count(*) FROM attempts"))).scalar()
            assert attempts == 0
            return len(got.dial)
        finally:
            await store.aclose()

    assert clock.run(main()) == 0
