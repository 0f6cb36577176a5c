"""The brainstorm poll's tables (ADR-071 with ADR-072).

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


def upgrade() -> None:
    """Create polls, poll_participants, poll_answers, poll_idea_marks, poll_ai_runs, poll_audit."""
    op.create_table(
        "polls",
        sa.Column("evaluation_id", sa.String(64), primary_key=True),
        sa.Column("again_of", sa.String(64), nullable=True),
        sa.Column("teacher_id", sa.String(200), nullable=False),
        sa.Column("anonymous", sa.Boolean, nullable=False),
        sa.Column("classroom_id", sa.String(200), nullable=True),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("max_ideas", sa.Integer, nullable=False),
        sa.Column("roster", sa.Text, nullable=False),
        sa.Column("votes", sa.Boolean, nullable=False),
        sa.Column("moderation", sa.Boolean, nullable=False),
        sa.Column("ai", sa.Boolean, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("opened_at", sa.Double, nullable=False),
        sa.Column("closed_at", sa.Double, nullable=True),
        sa.Column("frozen_at", sa.Double, nullable=True),
        sa.Column("frozen_view", sa.Text, nullable=True),
    )
    op.create_index("ix_polls_closed_at", "polls", ["closed_at"])
    op.create_table(
        "poll_participants",
        sa.Column("ord", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("evaluation_id", sa.String(64), nullable=False),
        sa.Column("attempt_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=True),
        sa.Column("person", sa.Text, nullable=True),
        sa.Column("joined_at", sa.Double, nullable=False),
        sa.UniqueConstraint("evaluation_id", "attempt_id"),
    )
    op.create_table(
        "poll_answers",
        sa.Column("ord", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("evaluation_id", sa.String(64), nullable=False),
        sa.Column("attempt_id", sa.String(200), nullable=False),
        sa.Column("guest", sa.Boolean, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.UniqueConstraint("evaluation_id", "attempt_id"),
    )
    op.create_table(
        "poll_idea_marks",
        sa.Column("evaluation_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("status", sa.String(10), nullable=True),
        sa.Column("merged_into", sa.String(200), nullable=True),
        sa.Column("label", sa.String(100), nullable=True),
        sa.Column("correction", sa.String(100), nullable=True),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "poll_ai_runs",
        sa.Column("evaluation_id", sa.String(64), primary_key=True),
        sa.Column("lease_at", sa.Double, nullable=True),
        sa.Column("heartbeat_at", sa.Double, nullable=True),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("error", sa.String(40), nullable=True),
        sa.Column("error_at", sa.Double, nullable=True),
    )
    op.create_table(
        "poll_audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("evaluation_id", sa.String(64), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_index("ix_poll_audit_evaluation", "poll_audit", ["evaluation_id", "id"])


def downgrade() -> None:
    """Drop the poll's tables."""
    op.drop_index("ix_poll_audit_evaluation", "poll_audit")
    op.drop_table("poll_audit")
    op.drop_table("poll_ai_runs")
    op.drop_table("poll_idea_marks")
    op.drop_table("poll_answers")
    op.drop_table("poll_participants")
    op.drop_index("ix_polls_closed_at", "polls")
    op.drop_table("polls")
