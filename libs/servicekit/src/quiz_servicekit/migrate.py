"""Alembic migrations of every service: one env body, one upgrade, safe across replicas.

A service's `migrations/env.py` is two lines:

    from quiz_servicekit.migrate import run_env
    run_env(SQLModel.metadata, version_table="alembic_version_review", lock_id=7_300_101)

Replicas that start together (or a Kubernetes Job racing a rolling update) serialise on a
PostgreSQL session advisory lock (`lock_id`, one per service) or, on SQLite, on an exclusive
lock of a file beside the database: the first migrates, the others wait, then find the schema
at head and go on. Each service keeps its own version table, so several services may share one
PostgreSQL database without reading each other's revisions.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, MetaData, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from quiz_servicekit.db import sync_url

log = logging.getLogger(__name__)


def upgrade(url: str, script_location: str | Path) -> None:
    """Upgrade the database at `url` to the head of the alembic scripts at `script_location`."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    command.upgrade(cfg, "head")


@contextmanager
def migration_lock(conn: Connection, lock_id: int) -> Iterator[None]:
    """Hold the service's migration lock for the block; log when another holder makes us wait."""
    if conn.dialect.name == "postgresql":
        got = conn.execute(text("SELECT pg_try_advisory_lock(:id)"), {"id": lock_id}).scalar()
        if not got:
            log.info("migrations: another process holds lock %d; waiting for it", lock_id)
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": lock_id})
        conn.commit()  # a session lock: it outlives this transaction, not the connection
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": lock_id})
            conn.commit()
        return
    database = make_url(str(conn.engine.url)).database
    if not database or database == ":memory:":
        yield  # a private in-memory database has nobody to race with
        return
    with open(f"{database}.migrate-lock", "a+b") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("migrations: another process migrates %s; waiting for it", database)
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def run_env(target_metadata: MetaData, *, version_table: str, lock_id: int) -> None:
    """The body of a service's alembic env.py: online upgrade under the migration lock.

    Offline mode (`alembic upgrade --sql`) prints the SQL without a lock.
    """
    from alembic import context

    url = context.config.get_main_option("sqlalchemy.url") or ""
    if context.is_offline_mode():
        context.configure(
            url=url,
            target_metadata=target_metadata,
            version_table=version_table,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn, migration_lock(conn, lock_id):
            context.configure(
                connection=conn,
                target_metadata=target_metadata,
                version_table=version_table,
                # SQLite alters tables by copying them; batch mode does that for us.
                render_as_batch=conn.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
            conn.commit()
    finally:
        engine.dispose()
