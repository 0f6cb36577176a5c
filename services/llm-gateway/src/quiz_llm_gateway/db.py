"""Database specifics of the gateway: its migrations, and SQLite writers that lock at BEGIN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

MIGRATIONS = Path(__file__).parent / "migrations"
# A writer waits this long for the lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 60_000


def sqlite_immediate_sync(engine: Engine) -> None:
    """WAL, a busy timeout, and the write lock taken at BEGIN (BEGIN IMMEDIATE).

    With pysqlite's deferred BEGIN a transaction that reads then writes can fail at once with
    "database is locked" when another process holds the lock (no busy wait on a lock upgrade);
    BEGIN IMMEDIATE waits for the writer lock up front, under busy_timeout.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
