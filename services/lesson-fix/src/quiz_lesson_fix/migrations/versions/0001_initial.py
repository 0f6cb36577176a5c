"""The per-person rate limit of "Fix with AI".

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create fix_rate_limits."""
    op.create_table(
        "fix_rate_limits",
        sa.Column("person", sa.String(200), primary_key=True),
        sa.Column("tat", sa.Double, nullable=False),
    )
    op.create_index("ix_fix_rate_limits_tat", "fix_rate_limits", ["tat"])


def downgrade() -> None:
    """Drop fix_rate_limits."""
    op.drop_index("ix_fix_rate_limits_tat", "fix_rate_limits")
    op.drop_table("fix_rate_limits")
