"""Where the campaign store is: ``--db``, ``CALLRT_DB_URL`` or the default file.

A SQLite URL with three slashes names a path relative to the working folder
(``sqlite:///tmp/c.db`` is ``./tmp/c.db``); four slashes name an absolute one.
:func:`locate` resolves a relative path once, so every message shows the file
that is really used, and says where the URL came from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agent.campaigns.store import DB_ENV, StoreError, default_db_url

__all__ = ["StoreLocation", "default_store_help", "locate"]


@dataclass(frozen=True)
class StoreLocation:
    """A campaign store URL and where it came from.

    Attributes:
        url: The URL to open; a SQLite path in it is absolute.
        source: ``--db``, the environment variable's name, or ``default``.
        path: The SQLite file (absolute), or None for PostgreSQL and in-memory.
        written: The URL as given, when its SQLite path was relative (else None).
    """

    url: str
    source: str
    path: Path | None = None
    written: str | None = None

    def note(self) -> str | None:
        """One line saying which file a relative SQLite URL means, or None."""
        if self.written is None or self.path is None:
            return None
        return f"campaign store: {self.path} ({self._origin()})"

    def missing(self) -> str:
        """The message for a command that needs a store that does not exist."""
        hint = self._origin() if self.written is not None else self.source
        return f"no campaign store at {self.path} ({hint}; `campaign create` makes one)"

    def _origin(self) -> str:
        if self.source == "default":
            return "the default, runs/campaigns.db in the working folder; --db picks another"
        absolute = f"sqlite:///{self.path}"
        return (
            f"{self.source} {self.written} is relative to the working folder; "
            f"an absolute path has four slashes: {absolute}"
        )


def locate(db: str | None) -> StoreLocation:
    """The store to open: ``db`` (from ``--db``), else ``CALLRT_DB_URL``, else the default.

    Raises:
        StoreError: The URL cannot be parsed (the message names its source).
    """
    env = os.environ.get(DB_ENV, "").strip()
    if db:
        url, source = db, "--db"
    elif env:
        url, source = env, DB_ENV
    else:
        url, source = default_db_url(), "default"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"{source}: expected a database URL like sqlite:///runs/campaigns.db or "
            f"postgresql://user:pass@host/db, got {url!r}"
        ) from None
    if parsed.get_backend_name() != "sqlite":
        return StoreLocation(url=url, source=source)
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return StoreLocation(url=url, source=source)
    path = Path(database).expanduser()
    if path.is_absolute():
        return StoreLocation(url=url, source=source, path=path)
    absolute = Path.cwd() / path
    resolved = parsed.set(database=str(absolute)).render_as_string(hide_password=False)
    return StoreLocation(url=resolved, source=source, path=absolute, written=url)


def default_store_help() -> str:
    """The ``--db`` help text, naming the default file for this working folder."""
    return (
        "campaign store URL: sqlite:///FILE (relative to the working folder; "
        "sqlite:////abs/FILE for an absolute path) or postgresql://USER:PASS@HOST/DB. "
        f"Default: ${DB_ENV}, else {Path.cwd() / 'runs' / 'campaigns.db'}"
    )
