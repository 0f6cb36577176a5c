"""Alembic environment of the test service: servicekit's run_env."""

from __future__ import annotations

from sqlalchemy import MetaData

from quiz_servicekit.migrate import run_env

run_env(MetaData(), version_table="alembic_version_kit_migrating", lock_id=4_242_001)
