"""Initial campaign store: campaigns, contacts, attempts, calls, events, do-not-call.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("source", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "contacts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("line", sa.Integer, nullable=False),
        sa.Column("number", sa.String(20), nullable=False),
        sa.Column("zones", sa.JSON, nullable=False),
        sa.Column("variables", sa.JSON, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_at", sa.DateTime, nullable=False),
        sa.Column("lease_owner", sa.String(120)),
        sa.Column("lease_until", sa.DateTime),
        sa.Column("result", sa.String(20)),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("campaign_id", "number", name="uq_contacts_campaign_number"),
    )
    op.create_index("ix_contacts_due", "contacts", ["campaign_id", "state", "next_at"])
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("contact_id", sa.Integer, sa.ForeignKey("contacts.id"), nullable=False),
        sa.Column("attempt_no", sa.Integer, nullable=False),
        sa.Column("dialer", sa.String(120), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("ended_at", sa.DateTime),
        sa.Column("disposition", sa.String(20)),
        sa.UniqueConstraint("contact_id", "attempt_no", name="uq_attempts_contact_no"),
    )
    op.create_index("ix_attempts_campaign", "attempts", ["campaign_id", "started_at"])
    op.create_table(
        "calls",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "attempt_id", sa.Integer, sa.ForeignKey("attempts.id"), nullable=False, unique=True
        ),
        sa.Column("call_id", sa.String(64)),
        sa.Column("disposition", sa.String(20), nullable=False),
        sa.Column("voicemail_left", sa.Boolean, nullable=False),
        sa.Column("amd_category", sa.String(30)),
        sa.Column("duration", sa.Float),
        sa.Column("transcript_path", sa.Text),
        sa.Column("recording_path", sa.Text),
        sa.Column("detail", sa.Text),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("contact_id", sa.Integer),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
    )
    op.create_index("ix_events_campaign", "events", ["campaign_id", "at"])
    op.create_table(
        "dnc",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id")),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("value", sa.String(20), nullable=False),
        sa.Column("added_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("campaign_id", "kind", "value", name="uq_dnc_entry"),
    )
    op.create_index("ix_dnc_value", "dnc", ["value"])


def downgrade() -> None:
    for table in ("dnc", "events", "calls", "attempts", "contacts", "campaigns"):
        op.drop_table(table)
