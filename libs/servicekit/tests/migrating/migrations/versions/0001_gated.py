"""A table, created once; on PostgreSQL the upgrade first waits at the test's gate.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GATE_LOCK_ID = 4_242_999


def upgrade() -> None:
    """Wait while the test holds the gate, then create the table (twice would fail)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text(f"SELECT pg_advisory_xact_lock_shared({GATE_LOCK_ID})"))
    op.create_table("migrated_once", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    op.drop_table("migrated_once")
