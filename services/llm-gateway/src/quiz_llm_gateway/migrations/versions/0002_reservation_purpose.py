"""Reservations record the call's purpose and whether a person made it (ADR-060 §5 share).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add purpose and has_person; holds made before this revision have neither (null)."""
    with op.batch_alter_table("reservations") as batch:
        batch.add_column(sa.Column("purpose", sa.String(32), nullable=True))
        batch.add_column(sa.Column("has_person", sa.Boolean, nullable=True))
    op.create_index("ix_reservations_day_purpose", "reservations", ["day", "purpose"])


def downgrade() -> None:
    """Drop the two columns."""
    op.drop_index("ix_reservations_day_purpose", table_name="reservations")
    with op.batch_alter_table("reservations") as batch:
        batch.drop_column("has_person")
        batch.drop_column("purpose")
