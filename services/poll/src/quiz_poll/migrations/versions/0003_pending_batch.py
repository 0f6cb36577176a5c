"""The AI run remembers the batch it sent until its verdicts are written (issue 20).

- `pending`: the batch call of the pass holding the lease, as JSON (its ideas, its context and
  the `llm.v1.complete` request with its request id), written before the call and cleared with
  the verdicts. A pass run again under the same lease (its job delivered again after a replica
  died, or after a reply that never came) sends that same request first: the gateway answers it
  from the call it made and paid. Chosen afresh, the batch would hold the ideas typed meanwhile
  too — another request id, and the first ideas paid twice.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add poll_ai_runs.pending."""
    with op.batch_alter_table("poll_ai_runs") as batch:
        batch.add_column(sa.Column("pending", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table("poll_ai_runs") as batch:
        batch.drop_column("pending")
