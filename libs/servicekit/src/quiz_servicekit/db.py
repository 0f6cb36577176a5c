"""The one database story of every service: a sync engine, each transaction run whole in a thread.

SQLite (WAL) is the embedded default, PostgreSQL (psycopg) comes through DATABASE_URL. Why not
SQLAlchemy's async engine: on a 2-core host every awaited statement through it costs ~0.7 ms of
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

A PostgreSQL hot path whose transaction is a fixed list of statements sends them with
`await db.pipeline([(sql, params), ...])`: one round trip, one transaction (BEGIN, the
statements, COMMIT sent together), on the event loop with no worker thread
(`quiz_servicekit.pg_pipeline`).
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from quiz_servicekit.pg_pipeline import PgConnections, Sent, Statements, libpq_conninfo

P = ParamSpec("P")
T = TypeVar("T")
_NAMED = re.compile(r"(?<!:):([a-z_]+)")

_AFTER_COMMIT = "quiz_after_commit"
# A writer waits this long for another process's write lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 60_000
# libpq's connection settings when DATABASE_URL names none of its own: without them a database
# that went silent (a frozen pod, a node off the network) holds a connection attempt for the
# kernel's TCP timeout, ~2 min, and a pooled connection for ~15 min of retransmissions, while
# each call waits on it. With them a connect gives up after 5 s, an idle connection is probed
# after 10 s and dropped after 3 unanswered probes, and unacknowledged data aborts the
# connection after 20 s: the caller gets the service's "database unavailable" answer instead.
PG_CONNECT_DEFAULTS: dict[str, int] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}
# A pooled PostgreSQL connection idle longer than this is pinged before use (a round trip);
# one used more recently is not. SQLAlchemy's pool_pre_ping pings at every checkout: on the
# llm-gateway that was two round trips in nine per call (bench/llm_gateway_pg_trips.py). A
# connection the server dropped within this window fails its first statement instead, which
# the pool then replaces (and a service answers as an outage, a fault that passes).
PG_PING_IDLE_S = 1.0
_IDLE_SINCE = "quiz_idle_since"


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


def pg_connect_defaults(query: Mapping[str, Any]) -> dict[str, int]:
    """The PG_CONNECT_DEFAULTS a URL's `query` does not set itself (its own win:
    `?connect_timeout=30` in DATABASE_URL), for both the sync engine and the loop's pipelines."""
    return {k: v for k, v in PG_CONNECT_DEFAULTS.items() if k not in query}


def create_sync_engine(
    url: str, *, pool_size: int, sqlite_busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> Engine:
    """An engine for `url` with the pragmas and pool decided once for every service."""
    parsed = make_url(sync_url(url))
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, pool_size=pool_size)
        _sqlite_writers_lock_at_begin(engine, sqlite_busy_timeout_ms)
        return engine
    defaults = pg_connect_defaults(parsed.query)
    # LIFO: the few connections a light load needs stay warm (their prepared statements, the
    # server backend's caches) instead of cycling through the whole pool.
    engine = create_engine(
        parsed, pool_size=pool_size, max_overflow=0, pool_use_lifo=True, connect_args=defaults
    )
    _ping_when_idle(engine, PG_PING_IDLE_S)
    return engine


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """Ping a pooled connection at checkout only when it sat idle over `idle_s`; a failed ping
    makes the pool replace it (SQLAlchemy's checkout-event disconnect handling)."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < idle_s:
            return  # just connected, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_conn)
            dbapi_conn.rollback()  # the ping's implicit transaction, so autocommit can be set
        except Exception as e:
            raise sa_exc.DisconnectionError(f"pooled connection dead: {e}") from e


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
        self._pg: PgConnections | None = None
        if self.dialect == "postgresql":
            self._pg = PgConnections(
                libpq_conninfo(self.url),
                size=threads,
                connect_kwargs=pg_connect_defaults(make_url(self.url).query),
                ping_idle_s=PG_PING_IDLE_S,
            )

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

    async def pipeline(self, statements: Statements) -> list[Sent]:
        """PostgreSQL only: `statements` (driver SQL, `Database.sql` form) in ONE round trip,
        on the event loop (`quiz_servicekit.pg_pipeline`): `BEGIN; s1; ...; sN; COMMIT` sent
        together, a single statement alone as its own transaction. Each statement runs after
        the one before it (its own snapshot in READ COMMITTED: a lock taken by s1 is held when
        s2 reads) but none can depend on another's result in Python — a repository that must
        branch on a result sends a second pipeline.

        The commit is the server's ordinary one: `synchronous_commit` as configured (a
        statement may lower it for its own transaction with `set_config(..., true)`). Returns
        one `Sent` per statement, in order (not for the BEGIN/COMMIT added). Raises as the sync
        engine does (SQLAlchemy's DBAPIError family: OperationalError for an outage,
        IntegrityError ...), the whole transaction rolled back.
        """
        if self._pg is None:
            raise RuntimeError(f"pipeline() is PostgreSQL's; this database is {self.dialect}")
        return await self._pg.pipeline(statements)

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
        if self._pg is not None:
            self._pg.close()


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
