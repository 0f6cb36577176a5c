"""One ledger row per (call, attempt): a settle replayed from the journal is written once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """A unique index on (call_id, attempt); settle inserts with ON CONFLICT DO NOTHING."""
    op.create_index("ux_llm_ledger_call_attempt", "llm_ledger", ["call_id", "attempt"], unique=True)


def downgrade() -> None:
    """Drop the index."""
    op.drop_index("ux_llm_ledger_call_attempt", table_name="llm_ledger")
