"""Idempotency keys shared by every replica: request digest, owner call, reply for a while.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create idempotency_keys."""
    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("call_id", sa.String(36), nullable=False),
        sa.Column("reply", sa.Text, nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    """Drop idempotency_keys."""
    op.drop_table("idempotency_keys")
