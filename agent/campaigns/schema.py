"""The campaign store's tables (SQLAlchemy Core), shared by the store and its migrations.

Times are stored as naive UTC and read back as aware UTC (:class:`UTCDateTime`),
so SQLite and PostgreSQL compare and return them the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)

__all__ = ["UTCDateTime", "metadata", "campaigns", "contacts", "attempts", "calls", "events", "dnc"]


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime, stored naive (UTC) in both SQLite and PostgreSQL."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value  # type: ignore[no-any-return]

    def process_result_value(self, value: Any, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]


metadata = MetaData()

campaigns = Table(
    "campaigns",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    # ready | running | paused | cancelled | done
    Column("status", String(20), nullable=False),
    Column("spec", JSON, nullable=False),
    Column("source", JSON, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

contacts = Table(
    "contacts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("campaign_id", Integer, ForeignKey("campaigns.id"), nullable=False),
    Column("line", Integer, nullable=False),
    Column("number", String(20), nullable=False),
    Column("zones", JSON, nullable=False),
    Column("variables", JSON, nullable=False),
    Column("priority", Integer, nullable=False),
    # pending | dialing | done
    Column("state", String(10), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_at", UTCDateTime(), nullable=False),
    Column("lease_owner", String(120)),
    Column("lease_until", UTCDateTime()),
    # the final result once done: an outcome, max-attempts, dnc, cancelled, no-window
    Column("result", String(20)),
    Column("updated_at", UTCDateTime(), nullable=False),
    UniqueConstraint("campaign_id", "number", name="uq_contacts_campaign_number"),
    Index("ix_contacts_due", "campaign_id", "state", "next_at"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("campaign_id", Integer, ForeignKey("campaigns.id"), nullable=False),
    Column("contact_id", Integer, ForeignKey("contacts.id"), nullable=False),
    Column("attempt_no", Integer, nullable=False),
    Column("dialer", String(120), nullable=False),
    # dialing | done | abandoned
    Column("status", String(10), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ended_at", UTCDateTime()),
    Column("disposition", String(20)),
    # one dial per attempt, enforced by the database
    UniqueConstraint("contact_id", "attempt_no", name="uq_attempts_contact_no"),
    Index("ix_attempts_campaign", "campaign_id", "started_at"),
)

calls = Table(
    "calls",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("attempt_id", Integer, ForeignKey("attempts.id"), nullable=False, unique=True),
    Column("call_id", String(64)),
    Column("disposition", String(20), nullable=False),
    Column("voicemail_left", Boolean, nullable=False),
    Column("amd_category", String(30)),
    Column("duration", Float),
    Column("transcript_path", Text),
    Column("recording_path", Text),
    Column("detail", Text),
    Column("recorded_at", UTCDateTime(), nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("campaign_id", Integer, ForeignKey("campaigns.id"), nullable=False),
    Column("contact_id", Integer),
    Column("at", UTCDateTime(), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("detail", JSON, nullable=False),
    Index("ix_events_campaign", "campaign_id", "at"),
)

dnc = Table(
    "dnc",
    metadata,
    Column("id", Integer, primary_key=True),
    # NULL: the global list
    Column("campaign_id", Integer, ForeignKey("campaigns.id")),
    # number | prefix
    Column("kind", String(10), nullable=False),
    Column("value", String(20), nullable=False),
    Column("added_at", UTCDateTime(), nullable=False),
    UniqueConstraint("campaign_id", "kind", "value", name="uq_dnc_entry"),
    Index("ix_dnc_value", "value"),
)
