"""Alembic environment of lesson-fix: servicekit's, with its own version table and lock."""

from __future__ import annotations

from quiz_lesson_fix.models import SQLModel
from quiz_servicekit.migrate import run_env

run_env(SQLModel.metadata, version_table="alembic_version_lesson_fix", lock_id=7_301_003)
