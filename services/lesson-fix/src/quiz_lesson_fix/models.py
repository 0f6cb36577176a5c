"""SQLModel tables of lesson-fix; alembic revisions under migrations/versions."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, Double, Index, String
from sqlmodel import Field, SQLModel

__all__ = ["MIGRATIONS", "FixRateLimit", "SQLModel"]

# The alembic scripts of these tables (servicekit's run_env, in migrations/env.py).
MIGRATIONS = Path(__file__).parent / "migrations"


class FixRateLimit(SQLModel, table=True):
    """One row per person who asked for a fix: when their bucket is full again (GCRA `tat`).

    Shared by every replica; a row whose `tat` has passed holds nothing and is pruned.
    """

    __tablename__ = "fix_rate_limits"
    __table_args__ = (Index("ix_fix_rate_limits_tat", "tat"),)

    person: str = Field(sa_column=Column(String(200), primary_key=True))
    tat: float = Field(sa_column=Column(Double, nullable=False))
