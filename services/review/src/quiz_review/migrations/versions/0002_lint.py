"""The item-writing-flaw lint in reviews (issue 30): the pools that turned it on, and the
language of each version (the lint's word lists).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create review_pool_lint; add review_versions.language (nullable: older events)."""
    op.create_table(
        "review_pool_lint",
        sa.Column("pool_id", sa.String(100), primary_key=True),
        sa.Column("set_by", sa.String(200), nullable=False),
        sa.Column("set_at", sa.String(32), nullable=False),
    )
    with op.batch_alter_table("review_versions") as batch:
        batch.add_column(sa.Column("language", sa.String(35), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("review_versions") as batch:
        batch.drop_column("language")
    op.drop_table("review_pool_lint")
