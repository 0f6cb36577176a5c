"""Budget days, reservations, ledger, rate events.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BIGID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "budget_days",
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cap_micros", sa.BigInteger, nullable=False),
        sa.Column("reserved_micros", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("spent_micros", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.create_table(
        "reservations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("call_id", sa.String(36), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("amount_micros", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("ix_reservations_expires_at", "reservations", ["expires_at"])
    op.create_table(
        "llm_ledger",
        sa.Column("id", BIGID, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("call_id", sa.String(36), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("person", sa.String(200), nullable=True),
        sa.Column("billed_to", sa.String(200), nullable=True),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("effort", sa.String(16), nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_micros", sa.BigInteger, nullable=False),
        sa.Column("reserved_micros", sa.BigInteger, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("provider_requests", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Integer, nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        sa.Column("trace_id", sa.String(32), nullable=True),
    )
    op.create_index("ix_llm_ledger_day_purpose", "llm_ledger", ["day", "purpose"])
    op.create_index("ix_llm_ledger_day_billed_to", "llm_ledger", ["day", "billed_to"])
    op.create_index("ix_llm_ledger_request_id", "llm_ledger", ["request_id"])
    op.create_table(
        "rate_events",
        sa.Column("id", BIGID, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_index("ix_rate_events_key_at", "rate_events", ["key", "at"])


def downgrade() -> None:
    """Drop the four tables."""
    op.drop_table("rate_events")
    op.drop_table("llm_ledger")
    op.drop_table("reservations")
    op.drop_table("budget_days")
