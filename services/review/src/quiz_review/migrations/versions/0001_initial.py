"""The review's read model, its reviews and the pools that asked for them (ADR-060).

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
    """Create review_versions, review_gone, question_reviews, review_pools."""
    op.create_table(
        "review_versions",
        sa.Column("version_id", sa.String(100), primary_key=True),
        sa.Column("question_id", sa.String(100), nullable=False),
        sa.Column("pool_id", sa.String(100), nullable=False),
        sa.Column("version_number", sa.Integer, nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("explanation", sa.Text, nullable=False),
        sa.Column("internal_name", sa.String(500), nullable=False),
        sa.Column("published_at", sa.String(32), nullable=False),
        sa.Column("live", sa.Boolean, nullable=False),
    )
    op.create_index(
        "ix_review_versions_question", "review_versions", ["question_id", "version_number"]
    )
    op.create_index("ix_review_versions_pool", "review_versions", ["pool_id"])
    op.create_table(
        "review_gone",
        sa.Column("key", sa.String(120), primary_key=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    )
    op.create_table(
        "question_reviews",
        sa.Column("version_id", sa.String(100), primary_key=True),
        sa.Column("question_id", sa.String(100), nullable=False),
        sa.Column("version_number", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("findings", sa.Text, nullable=False),
        sa.Column("reviewed_at", sa.String(32), nullable=False),
        sa.Column("reviewed_for", sa.String(200), nullable=True),
    )
    op.create_index("ix_question_reviews_question", "question_reviews", ["question_id"])
    op.create_table(
        "review_pools",
        sa.Column("pool_id", sa.String(100), primary_key=True),
        sa.Column("enabled_by", sa.String(200), nullable=False),
        sa.Column("enabled_at", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    """Drop the review's tables."""
    op.drop_table("review_pools")
    op.drop_index("ix_question_reviews_question", "question_reviews")
    op.drop_table("question_reviews")
    op.drop_table("review_gone")
    op.drop_index("ix_review_versions_pool", "review_versions")
    op.drop_index("ix_review_versions_question", "review_versions")
    op.drop_table("review_versions")
