"""Engine of the gateway's database (SQLite WAL or PostgreSQL) and its alembic runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 60_000


def is_sqlite(url: str) -> bool:
    """Whether a database URL is SQLite."""
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, *, pool_size: int = 20) -> AsyncEngine:
    """An async engine; SQLite gets WAL, a busy timeout and BEGIN IMMEDIATE writer transactions."""
    if is_sqlite(url):
        _ensure_sqlite_dir(url)
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        sqlite_immediate(engine)
        return engine
    return create_async_engine(
        url, pool_size=pool_size, max_overflow=pool_size, pool_timeout=60, pool_pre_ping=True
    )


def _ensure_sqlite_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def sqlite_immediate(engine: AsyncEngine) -> None:
    """Take the write lock at BEGIN: two processes never deadlock upgrading a read lock."""
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let us emit BEGIN ourselves instead of pysqlite's deferred implicit one.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def sync_url(url: str) -> str:
    """The synchronous driver of a URL, for alembic."""
    parsed = make_url(url)
    if parsed.drivername == "sqlite+aiosqlite":
        parsed = parsed.set(drivername="sqlite")
    return parsed.render_as_string(hide_password=False)


def run_migrations(url: str) -> None:
    """Upgrade the database to head (safe when several replicas start at once on PostgreSQL)."""
    if is_sqlite(url):
        _ensure_sqlite_dir(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    command.upgrade(cfg, "head")
