"""The ledger's prompt-cache token counts (issue 31 point 2).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_COLUMNS = ("cache_read_input_tokens", "cache_creation_input_tokens")


def upgrade() -> None:
    """Add how many of a row's input tokens were read from / written to the prompt cache.

    NOT NULL with a server default of 0: rows written before are rows without caching."""
    with op.batch_alter_table("llm_ledger") as batch:
        for name in _COLUMNS:
            batch.add_column(
                sa.Column(name, sa.BigInteger, nullable=False, server_default=sa.text("0"))
            )


def downgrade() -> None:
    """Drop the two columns."""
    with op.batch_alter_table("llm_ledger") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
