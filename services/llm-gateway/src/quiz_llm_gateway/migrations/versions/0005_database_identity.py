"""The database's own id: the settle journal's subject (one per database, issue 20).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create gateway_identity with one random id (hex, a NATS subject token)."""
    table = op.create_table(
        "gateway_identity",
        sa.Column("id", sa.String(32), primary_key=True),
    )
    op.bulk_insert(table, [{"id": uuid.uuid4().hex}])


def downgrade() -> None:
    """Drop gateway_identity."""
    op.drop_table("gateway_identity")
