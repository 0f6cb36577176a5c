"""Alembic environment of review: servicekit's, with its own version table and lock."""

from __future__ import annotations

from quiz_review.models import SQLModel
from quiz_servicekit.migrate import run_env

run_env(SQLModel.metadata, version_table="alembic_version_review", lock_id=7_301_060)
