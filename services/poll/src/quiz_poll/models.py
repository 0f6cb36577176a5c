"""SQLModel tables of poll (none yet); alembic revisions under migrations/versions."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import SQLModel

__all__ = ["MIGRATIONS", "SQLModel"]

# The alembic scripts of these tables (servicekit's run_env, in migrations/env.py).
MIGRATIONS = Path(__file__).parent / "migrations"
