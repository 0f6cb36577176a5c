"""Database specifics of the gateway: its migrations, and SQLite writers that lock at BEGIN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).parent / "migrations"


def sqlite_immediate(engine: AsyncEngine) -> None:
    """Take the write lock at BEGIN: two processes never deadlock upgrading a read lock.

    The kit's engine sets WAL and busy_timeout; with pysqlite's deferred BEGIN a transaction
    that reads then writes can fail with "database is locked" at once (no busy wait on a lock
    upgrade). BEGIN IMMEDIATE waits for the writer lock up front, under busy_timeout.
    """
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let us emit BEGIN ourselves instead of pysqlite's implicit deferred one.
        dbapi_conn.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
