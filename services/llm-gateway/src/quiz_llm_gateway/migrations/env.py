"""Alembic environment of the gateway: servicekit's, with the gateway's table and lock."""

from __future__ import annotations

from quiz_llm_gateway.rows.tables import SQLModel
from quiz_servicekit.migrate import run_env

run_env(SQLModel.metadata, version_table="alembic_version_llm_gateway", lock_id=5_804_171)
