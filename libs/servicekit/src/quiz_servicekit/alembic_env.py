"""The body of every service's alembic env.py: online upgrades on a sync engine."""

from __future__ import annotations

from sqlalchemy import MetaData, create_engine
from sqlalchemy.pool import NullPool


def run_env(target_metadata: MetaData) -> None:
    """Run the migrations alembic asked for, online or offline."""
    from alembic import context

    url = context.config.get_main_option("sqlalchemy.url")
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url or "", poolclass=NullPool)
    with engine.connect() as conn:
        context.configure(
            connection=conn,
            target_metadata=target_metadata,
            # SQLite alters tables by copying them; batch mode does that for us.
            render_as_batch=conn.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
