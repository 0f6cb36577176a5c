"""Alembic environment of the gateway: online migrations, serialised by an advisory lock on PG."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool, text

from quiz_llm_gateway.models import SQLModel

config = context.config
target_metadata = SQLModel.metadata
# Replicas starting together must not race on CREATE TABLE.
MIGRATION_LOCK_ID = 5_804_171


def run_migrations_online() -> None:
    """Run the upgrade on one connection, in one transaction."""
    connectable = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with connectable.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
            connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                version_table="alembic_version_llm_gateway",
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
        finally:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID}
                )
                connection.commit()
    connectable.dispose()


run_migrations_online()
