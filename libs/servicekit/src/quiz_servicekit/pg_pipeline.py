"""PostgreSQL pipelines on the event loop: a transaction's statements in one round trip, with no
worker thread between the caller and the socket.

`Database.pipeline(statements)` lands here on PostgreSQL. The sync engine's transactions each
cost a hop to a worker thread and back (a wake-up and a GIL handover each way); for the two
statements of an llm-gateway call that is most of what PostgreSQL costs beyond SQLite at
concurrency 1 (docs/performance.md, issue 32 point 6). psycopg's `AsyncConnection` in pipeline
mode sends `BEGIN; s1; ...; sN; COMMIT` and reads the answers on the loop itself.

The connections are a small LIFO pool of our own, not psycopg_pool's: that pool, finding the
server gone, waits up to its `timeout` (30 s by default) for its background reconnects, where a
service answers `unavailable` at once and lets its caller retry. Here a connection is made
when none is idle (failing at once when the server refuses), a broken one is dropped, one idle
over `ping_idle_s` is pinged before use (the sync engine's rule, `PG_PING_IDLE_S`), and at most
`size` are open.

Errors are SQLAlchemy's, as from the sync engine (`sqlalchemy.exc.DBAPIError.instance`):
OperationalError for an outage (connection_invalidated set when the connection broke),
IntegrityError for a violated key ... — so a repository maps them the same on either path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

Statements = Sequence[tuple[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Sent:
    """What one statement of a pipeline answered: its rowcount and the rows it returned."""

    rowcount: int
    rows: list[tuple[Any, ...]]


def libpq_conninfo(sqlalchemy_url: str) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (`postgresql+psycopg://...` → `postgresql://`),
    its query (`?connect_timeout=30`) kept."""
    return (
        make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )


class PgConnections:
    """At most `size` autocommit `AsyncConnection`s to `conninfo`, the last used first.

    `connect_kwargs`: libpq settings the conninfo does not name (`PG_CONNECT_DEFAULTS`).
    Create and use it on one event loop.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        size: int,
        connect_kwargs: Mapping[str, Any],
        ping_idle_s: float,
    ) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.conninfo = conninfo
        self.size = size
        self.connect_kwargs = dict(connect_kwargs)
        self.ping_idle_s = ping_idle_s
        # (connection, monotonic time it was given back), the most recent last.
        self._idle: list[tuple[psycopg.AsyncConnection[Any], float]] = []
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    async def pipeline(self, statements: Statements) -> list[Sent]:
        """`statements` in one round trip: one transaction when there are several (BEGIN ...
        COMMIT added), a single statement its own. One `Sent` per statement, in order.

        Runs to its end once started, even when the awaiting task is cancelled (as the sync
        engine's transaction in its thread does): a COMMIT sent is never left half-read on a
        connection that goes back to the pool.
        """
        task = asyncio.ensure_future(self._pipeline(list(statements)))
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _pipeline(self, body: list[tuple[str, Mapping[str, Any]]]) -> list[Sent]:
        if not body:
            return []
        wrapped = len(body) > 1
        if wrapped:
            body = [("BEGIN", {}), *body, ("COMMIT", {})]
        async with self._connection() as conn:
            statement = ""
            try:
                cursors = []
                if wrapped:
                    async with conn.pipeline():
                        for statement, params in body:
                            cur = conn.cursor()
                            await cur.execute(statement, dict(params) if params else None)
                            cursors.append(cur)
                else:
                    # One statement is one round trip either way: without pipeline mode's
                    # queue and sync, 20-50 µs less of Python per call.
                    ((statement, params),) = body
                    cur = conn.cursor()
                    await cur.execute(statement, dict(params) if params else None)
                    cursors.append(cur)
                sent = []
                for cur in cursors:
                    rows = await cur.fetchall() if cur.description else []
                    sent.append(Sent(cur.rowcount, list(rows)))
                    await cur.close()
            except psycopg.Error as e:
                if not conn.broken and conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    # An error inside BEGIN..COMMIT leaves the transaction aborted.
                    with contextlib.suppress(psycopg.Error):
                        await conn.rollback()
                raise _sqlalchemy_error(statement, e, invalidated=conn.broken) from e
        return sent[1:-1] if wrapped else sent

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._closed:
            raise sa_exc.InterfaceError("pipeline", None, RuntimeError("database closed"))
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            conn = await self._take()
            try:
                yield conn
            finally:
                usable = (
                    not conn.closed
                    and not conn.broken
                    and conn.info.transaction_status == pq.TransactionStatus.IDLE
                )
                if usable and not self._closed:
                    self._idle.append((conn, time.monotonic()))
                else:
                    await conn.close()

    async def _take(self) -> psycopg.AsyncConnection[Any]:
        """The connection used last, pinged first when it sat idle over ping_idle_s; a new one
        when none is idle or every idle one is dead."""
        while self._idle:
            conn, since = self._idle.pop()
            if conn.closed or conn.broken:
                await conn.close()  # a no-op when closed; a broken one's socket freed
                continue
            if time.monotonic() - since < self.ping_idle_s:
                return conn
            try:
                await conn.execute(";")
                return conn
            except psycopg.Error:
                await conn.close()  # dropped by the server meanwhile: the next one, or new
        try:
            return await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, **self.connect_kwargs
            )
        except psycopg.Error as e:
            raise _sqlalchemy_error("connect", e, invalidated=True) from e

    def close(self) -> None:
        """Close the idle connections (from any thread: libpq's own close, no await); those
        in use close when they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.pgconn.finish()


def _sqlalchemy_error(
    statement: str, error: psycopg.Error, *, invalidated: bool
) -> sa_exc.StatementError:
    return sa_exc.DBAPIError.instance(
        statement, None, error, psycopg.Error, connection_invalidated=invalidated
    )


def _retrieve(task: asyncio.Future[Any]) -> None:
    # A pipeline whose caller was cancelled: its error is nobody's to raise, nor to log twice.
    if not task.cancelled():
        task.exception()
