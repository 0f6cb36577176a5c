"""Marks remember the approved spellings and the ideas typed before the AI switch (issue 21).

- `seen`: the spellings a teacher (or the model) approved, as the room reads them, a JSON list;
  under moderation the room reads only these. Marks approved before this revision have none, so
  under moderation their ideas leave the room until the teacher approves them again (the safe
  side: nobody knows which spelling was seen).
- `teacher_only`: the idea was there when the AI was switched on (ADR-072 §5): never sent to
  the model, not even as context.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add poll_idea_marks.seen and poll_idea_marks.teacher_only."""
    with op.batch_alter_table("poll_idea_marks") as batch:
        batch.add_column(sa.Column("seen", sa.Text, nullable=True))
        batch.add_column(
            sa.Column("teacher_only", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("poll_idea_marks") as batch:
        batch.drop_column("teacher_only")
        batch.drop_column("seen")
