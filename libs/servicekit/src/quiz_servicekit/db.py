"""The one database story of every service: a sync engine, each transaction run whole in a thread.

SQLite (WAL) is the embedded default, PostgreSQL (psycopg) comes through DATABASE_URL. Why not the
async engine: on a 2-core host every awaited statement of the async drivers costs ~0.7 ms of
greenlet and thread hops, while a whole transaction of five statements run synchronously in one
worker thread costs ~0.7 ms in all (measured on the llm-gateway, docs/llm-gateway.md). So a
repository writes each operation once, as a plain function of a `Connection`, and awaits it:

    class Repository:
        def __init__(self, db: Database) -> None:
            self.db = db

        @transaction
        def reserve(self, conn: Connection, day: date, micros: int) -> bool:
            ...  # one transaction, committed when the function returns, rolled back if it raises

        @read_only
        def totals(self, conn: Connection, day: date) -> Totals | None: ...

    ok = await repo.reserve(day, 5000)
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url

P = ParamSpec("P")
T = TypeVar("T")
_NAMED = re.compile(r"(?<!:):([a-z_]+)")

_AFTER_COMMIT = "quiz_after_commit"
# A writer waits this long for another process's write lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 60_000


def sync_url(url: str) -> str:
    """The sync-driver form of a database URL (sqlite3, psycopg); async driver names accepted."""
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
    return f"sqlite:///{path}"


def _sqlite_writers_lock_at_begin(
    engine: Engine, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> None:
    """WAL, a busy timeout, foreign keys, and the write lock taken at BEGIN (BEGIN IMMEDIATE).

    WAL lets readers run beside the one writer. With pysqlite's deferred BEGIN a transaction
    that reads then writes can fail at once with "database is locked" when another process
    holds the lock (SQLite does not busy-wait on a lock upgrade); BEGIN IMMEDIATE waits for the
    writer lock up front, under busy_timeout, so concurrent replicas queue instead of failing.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def create_sync_engine(
    url: str, *, pool_size: int, sqlite_busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> Engine:
    """An engine for `url` with the pragmas and pool decided once for every service."""
    parsed = make_url(sync_url(url))
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, pool_size=pool_size)
        _sqlite_writers_lock_at_begin(engine, sqlite_busy_timeout_ms)
        return engine
    return create_engine(parsed, pool_size=pool_size, max_overflow=0, pool_pre_ping=True)


class Database:
    """A service's database: the engine and a bounded pool of threads that run transactions.

    `threads` bounds both the worker threads and the pooled connections: a transaction never
    waits for a connection once it has a thread.
    """

    def __init__(
        self,
        url: str,
        *,
        threads: int = 8,
        name: str = "db",
        sqlite_busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
    ) -> None:
        self.url = sync_url(url)
        self.engine = create_sync_engine(
            self.url, pool_size=threads, sqlite_busy_timeout_ms=sqlite_busy_timeout_ms
        )
        self.dialect: str = self.engine.dialect.name
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{name}-db")

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a worker thread of this database (it opens its own transaction)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn)

    def write(self, fn: Callable[[Connection], T]) -> T:
        """In the calling thread: `fn` in one transaction, committed, or rolled back if it raises.

        What `fn` registered with `after_commit` runs once the commit succeeded.
        """
        callbacks: list[Callable[[], None]] = []
        with self.engine.begin() as conn:
            conn.info[_AFTER_COMMIT] = callbacks
            try:
                result = fn(conn)
            finally:
                # info belongs to the pooled DBAPI connection: never leave ours behind. A
                # connection the server dropped is invalidated (discarded, not pooled): reading
                # its info would raise PendingRollbackError over the real, outage error.
                if not conn.invalidated:
                    conn.info.pop(_AFTER_COMMIT, None)
        for callback in callbacks:
            callback()
        return result

    def read(self, fn: Callable[[Connection], T]) -> T:
        """In the calling thread: `fn` on a connection whose transaction is rolled back after."""
        with self.engine.connect() as conn:
            try:
                return fn(conn)
            finally:
                conn.rollback()

    async def ping(self) -> bool:
        """The readiness check: `SELECT 1` answers through the same pool as every query."""
        return await self.run(
            lambda: self.read(lambda c: c.execute(text("SELECT 1")).scalar()) == 1
        )

    def sql(self, statement: str) -> str:
        """A `:name` statement in the driver's own paramstyle, for `exec_driver_sql`.

        Plain driver SQL skips SQLAlchemy's compile step: about five times cheaper than Core on
        the hot path. sqlite3 takes `:name`, psycopg `%(name)s`.
        """
        if self.dialect == "postgresql":
            return _NAMED.sub(lambda m: f"%({m.group(1)})s", statement)
        return statement

    def date_param(self, day: date) -> date | str:
        """A date as `exec_driver_sql` must pass it: ISO text on SQLite, as SQLAlchemy stores it."""
        # sqlite3's own date adapter is deprecated (Python 3.12).
        return day if self.dialect == "postgresql" else day.isoformat()

    def close(self) -> None:
        """Stop the worker threads (after the transactions in hand) and close the connections."""
        self._pool.shutdown(wait=True)
        self.engine.dispose()


def after_commit(conn: Connection, callback: Callable[[], None]) -> None:
    """Run `callback` once the transaction of `conn` has committed (never if it rolls back).

    For caches of what other transactions can see only after the commit, e.g. "this day's row
    exists": remembered before the commit, a concurrent transaction would trust a row it cannot
    see yet.
    """
    conn.info[_AFTER_COMMIT].append(callback)


class HasDatabase(Protocol):
    """A repository: anything holding the Database its operations run on."""

    @property
    def db(self) -> Database: ...


R = TypeVar("R", bound=HasDatabase)


def transaction(
    fn: Callable[Concatenate[R, Connection, P], T],
) -> Callable[Concatenate[R, P], Awaitable[T]]:
    """Turn `def op(self, conn, ...) -> T` into `async def op(self, ...) -> T`: one transaction.

    The function runs whole in one of the database's worker threads, inside `engine.begin()`:
    committed when it returns, rolled back when it raises. Write each operation once, typed.
    """

    @functools.wraps(fn)
    async def run(self: R, *args: P.args, **kwargs: P.kwargs) -> T:
        db = self.db
        return await db.run(lambda: db.write(lambda conn: fn(self, conn, *args, **kwargs)))

    return run


def read_only(
    fn: Callable[Concatenate[R, Connection, P], T],
) -> Callable[Concatenate[R, P], Awaitable[T]]:
    """Like `transaction`, for reads: the connection's transaction is rolled back after."""

    @functools.wraps(fn)
    async def run(self: R, *args: P.args, **kwargs: P.kwargs) -> T:
        db = self.db
        return await db.run(lambda: db.read(lambda conn: fn(self, conn, *args, **kwargs)))

    return run
