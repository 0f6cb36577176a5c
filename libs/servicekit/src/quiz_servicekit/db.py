"""Database engines: SQLite (WAL) by default, PostgreSQL via DATABASE_URL; alembic upgrades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def async_url(url: str) -> str:
    """The async-driver form of a database URL (aiosqlite, psycopg)."""
    u = make_url(url)
    if u.drivername in ("sqlite", "sqlite+pysqlite"):
        u = u.set(drivername="sqlite+aiosqlite")
    elif u.drivername in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+asyncpg"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def sync_url(url: str) -> str:
    """The sync-driver form of a database URL, for alembic."""
    u = make_url(url)
    if u.drivername.startswith("sqlite"):
        u = u.set(drivername="sqlite")
    elif u.drivername.startswith("postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def default_sqlite_url(data_dir: str | Path, service: str) -> str:
    """The embedded default: one SQLite file per service under the data directory."""
    path = Path(data_dir).resolve() / f"{service}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite+aiosqlite:///{path}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets readers run beside the one writer; busy_timeout makes a second writer wait
    # for the lock instead of failing at once (several processes may share the file).
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine for `url`, tuned per dialect."""
    aurl = async_url(url)
    if aurl.startswith("sqlite"):
        engine = create_async_engine(aurl, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(aurl, **kwargs)


def run_migrations(url: str, script_location: str | Path) -> None:
    """Upgrade the database at `url` to the head of the alembic scripts at `script_location`."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    command.upgrade(cfg, "head")
