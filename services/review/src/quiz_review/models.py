"""SQLModel tables of review (ADR-060); alembic revisions under migrations/versions.

- `review_versions`: the read model of the published versions the question store announced
  (`questions.v1.version.published`), one row per version; `live` follows the question.
- `review_gone`: what the store retired or deleted (`question:<id>`, `version:<id>`), so a
  late or redelivered "published" event never brings back what is gone (at-least-once input).
- `question_reviews`: one row per reviewed version (clean, findings, ignored, failed); it goes
  with its version.
- `review_pools`: one row per pool whose owner turned the night's review on (off by default).
- `review_pool_lint`: one row per pool whose owner added the item-writing-flaw lint's notices
  to its reviews (issue 30; off by default).

Times are stored as fixed-width UTC text (`2026-07-01T12:05:00.000000Z`, see `repository.utc_text`):
they sort as they compare, the same on SQLite and PostgreSQL. Configs and findings are JSON text.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Boolean, Column, Index, Integer, String, Text
from sqlmodel import Field, SQLModel

__all__ = [
    "MIGRATIONS",
    "QuestionReviewRow",
    "ReviewGone",
    "ReviewPool",
    "ReviewPoolLint",
    "ReviewVersion",
    "SQLModel",
]

# The alembic scripts of these tables (servicekit's run_env, in migrations/env.py).
MIGRATIONS = Path(__file__).parent / "migrations"

ID = 100  # the contracts' Id bound
TIME = 32


class ReviewVersion(SQLModel, table=True):
    """A published version as the question store announced it (immutable but for `live`)."""

    __tablename__ = "review_versions"
    __table_args__ = (
        Index("ix_review_versions_question", "question_id", "version_number"),
        Index("ix_review_versions_pool", "pool_id"),
    )

    version_id: str = Field(sa_column=Column(String(ID), primary_key=True))
    question_id: str = Field(sa_column=Column(String(ID), nullable=False))
    pool_id: str = Field(sa_column=Column(String(ID), nullable=False))
    version_number: int = Field(sa_column=Column(Integer, nullable=False))
    type: str = Field(sa_column=Column(String(40), nullable=False))
    config: str = Field(sa_column=Column(Text, nullable=False))
    explanation: str = Field(sa_column=Column(Text, nullable=False))
    internal_name: str = Field(sa_column=Column(String(500), nullable=False))
    published_at: str = Field(sa_column=Column(String(TIME), nullable=False))
    live: bool = Field(sa_column=Column(Boolean, nullable=False))
    # The question's language when the store sent it (issue 30, migration 0002).
    language: str | None = Field(default=None, sa_column=Column(String(35), nullable=True))


class ReviewGone(SQLModel, table=True):
    """A retired/deleted question or a deleted version (`question:<id>`, `version:<id>`)."""

    __tablename__ = "review_gone"

    key: str = Field(sa_column=Column(String(ID + 20), primary_key=True))
    kind: str = Field(sa_column=Column(String(20), nullable=False))  # retired | deleted
    at: str = Field(sa_column=Column(String(TIME), nullable=False))


class QuestionReviewRow(SQLModel, table=True):
    """The review of one published version (ADR-060 §3)."""

    __tablename__ = "question_reviews"
    __table_args__ = (Index("ix_question_reviews_question", "question_id"),)

    version_id: str = Field(sa_column=Column(String(ID), primary_key=True))
    question_id: str = Field(sa_column=Column(String(ID), nullable=False))
    version_number: int = Field(sa_column=Column(Integer, nullable=False))
    state: str = Field(sa_column=Column(String(16), nullable=False))
    findings: str = Field(sa_column=Column(Text, nullable=False))
    reviewed_at: str = Field(sa_column=Column(String(TIME), nullable=False))
    # The person the call was made for ("Review now"); null for the night.
    reviewed_for: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))


class ReviewPool(SQLModel, table=True):
    """A pool whose owner turned the review on."""

    __tablename__ = "review_pools"

    pool_id: str = Field(sa_column=Column(String(ID), primary_key=True))
    enabled_by: str = Field(sa_column=Column(String(200), nullable=False))
    enabled_at: str = Field(sa_column=Column(String(TIME), nullable=False))


class ReviewPoolLint(SQLModel, table=True):
    """A pool whose owner turned the lint's notices on in its reviews (issue 30)."""

    __tablename__ = "review_pool_lint"

    pool_id: str = Field(sa_column=Column(String(ID), primary_key=True))
    set_by: str = Field(sa_column=Column(String(200), nullable=False))
    set_at: str = Field(sa_column=Column(String(TIME), nullable=False))
