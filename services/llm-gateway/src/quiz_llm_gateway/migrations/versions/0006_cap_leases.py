"""Slices of the day's cap leased by replicas (issue 24).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create cap_leases: one row per replica and day, its amount counted in reserved_micros."""
    op.create_table(
        "cap_leases",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("amount_micros", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("ix_cap_leases_expires_at", "cap_leases", ["expires_at"])


def downgrade() -> None:
    """Drop cap_leases."""
    op.drop_index("ix_cap_leases_expires_at", table_name="cap_leases")
    op.drop_table("cap_leases")
