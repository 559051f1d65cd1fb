"""Shared fixtures: scripted model sets for text-only replays on the virtual clock."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CALLS = ROOT / "tests" / "calls"
DEMO = ROOT / "configs" / "demo"


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # keep synthesised speech out of the user's cache during tests
    import os

    if "CALLRT_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("CALLRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def _pg_admin_url() -> str | None:
    import os

    url = os.environ.get("CALLRT_TEST_PG_URL", "").strip()
    if url:
        return url
    if os.environ.get("CALLRT_REQUIRE_PG") == "1":
        pytest.fail(
            "CALLRT_TEST_PG_URL is not set but CALLRT_REQUIRE_PG=1 (see scripts/postgres.sh)"
        )
    return None


def _pg_admin(sql: str) -> None:
    """Run one statement on the test server's admin database."""
    import asyncio

    import asyncpg
    from sqlalchemy.engine import make_url

    admin = _pg_admin_url()
    if admin is None:
        pytest.skip("no PostgreSQL for tests (make test starts one; or set CALLRT_TEST_PG_URL)")
    base = make_url(admin)

    async def run() -> None:
        conn = await asyncpg.connect(
            user=base.username,
            password=base.password,
            host=base.host or "127.0.0.1",
            port=base.port or 5432,
            database=base.database or "postgres",
        )
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def new_pg_database() -> tuple[str, str]:
    """Create an empty database on the test server: (its URL, its name)."""
    import uuid

    from sqlalchemy.engine import make_url

    name = f"callrt_t_{uuid.uuid4().hex[:10]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    admin = _pg_admin_url()
    assert admin is not None
    return make_url(admin).set(database=name).render_as_string(hide_password=False), name


def drop_pg_database(name: str) -> None:
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> object:
    """A fresh, empty PostgreSQL database for one test (skipped when no server is set up)."""
    url, name = new_pg_database()
    yield url
    drop_pg_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    """A fresh campaign store URL: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'campaigns.db'}"
        return
    url, name = new_pg_database()
    yield url
    drop_pg_database(name)
