"""The one database module on SQLite and PostgreSQL: one transaction per operation, typed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from quiz_servicekit.db import (
    PG_PING_IDLE_S,
    Database,
    after_commit,
    read_only,
    transaction,
)
from quiz_testkit.databases import postgres_database
from quiz_testkit.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration


class Counters:
    """A repository written the servicekit way: each operation once, as a function of conn."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.committed: list[str] = []

    @transaction
    def create(self, conn: Connection) -> None:
        conn.execute(text("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INT)"))

    @transaction
    def bump(self, conn: Connection, name: str, *, fail: bool = False) -> int:
        conn.exec_driver_sql(
            self.db.sql(
                "INSERT INTO counters (name, n) VALUES (:name, 1) "
                "ON CONFLICT (name) DO UPDATE SET n = counters.n + 1"
            ),
            {"name": name},
        )
        after_commit(conn, lambda: self.committed.append(name))
        if fail:
            raise RuntimeError("rolled back")
        return int(
            conn.execute(
                text("SELECT n FROM counters WHERE name = :name"), {"name": name}
            ).scalar_one()
        )

    @read_only
    def value(self, conn: Connection, name: str) -> int | None:
        return conn.execute(
            text("SELECT n FROM counters WHERE name = :name"), {"name": name}
        ).scalar()


@pytest.fixture
def counters(database_url: str) -> Iterator[Counters]:
    db = Database(database_url, threads=4, name="test")
    yield Counters(db)
    db.close()


async def test_a_transaction_commits_whole_or_not_at_all(counters: Counters) -> None:
    await counters.create()
    assert await counters.bump("a") == 1
    with pytest.raises(RuntimeError):
        await counters.bump("a", fail=True)
    assert await counters.value("a") == 1, "the failed bump was rolled back"
    assert counters.committed == ["a"], "after_commit ran for the commit only"


async def test_concurrent_writers_queue_instead_of_failing(counters: Counters) -> None:
    # SQLite: BEGIN IMMEDIATE + busy_timeout; PostgreSQL: the row lock of the upsert.
    await counters.create()
    await asyncio.gather(*[counters.bump("hot") for _ in range(40)])
    assert await counters.value("hot") == 40


async def test_ping_and_pragmas(counters: Counters) -> None:
    assert await counters.db.ping()
    if counters.db.dialect == "sqlite":
        mode = counters.db.read(lambda c: c.exec_driver_sql("PRAGMA journal_mode").scalar())
        assert mode == "wal"
    else:
        assert counters.db.sql("x = :name") == "x = %(name)s"


@pytest.mark.parametrize(("query", "most_s"), [("", 12.0), ("?connect_timeout=1", 4.0)])
async def test_a_silent_postgresql_is_an_error_in_seconds_not_a_hang(
    pg_available: bool, query: str, most_s: float
) -> None:
    """A server that accepts connections and never answers (a frozen pod): each call fails
    within libpq's connect timeout (5 s by default, the URL's own when it names one) instead of
    waiting for the kernel's TCP timeout; the database answers again once the server does."""
    if not pg_available:
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database() as url, TcpProxy("127.0.0.1", make_url(url).port or 5432) as proxy:
        db = Database(str(make_url(url).set(port=proxy.port)) + query, threads=2, name="silent")
        try:
            assert await db.ping()
            proxy.hold()
            began = time.monotonic()
            with pytest.raises(OperationalError):
                await asyncio.wait_for(db.ping(), 60)
            took = time.monotonic() - began
            print(f"[db] a silent server refused after {took:.1f} s")
            assert took < most_s
            # The event loop's connections (`Database.pipeline`) give up as soon.
            began = time.monotonic()
            with pytest.raises(OperationalError):
                await asyncio.wait_for(db.pipeline([("SELECT 1", {})]), 60)
            took = time.monotonic() - began
            print(f"[db] a pipeline to a silent server refused after {took:.1f} s")
            assert took < most_s
            proxy.accept()
            assert await db.ping()
            assert (await db.pipeline([("SELECT 1", {})]))[0].rows == [(1,)]
        finally:
            db.close()


class Pairs:
    """A PostgreSQL repository written with `pipeline`: several statements, one round trip."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @transaction
    def create(self, conn: Connection) -> None:
        conn.execute(text("CREATE TABLE IF NOT EXISTS pairs (k TEXT PRIMARY KEY, v INT)"))

    async def put(self, *pairs: tuple[str, int]) -> list[int]:
        sql = self.db.sql("INSERT INTO pairs (k, v) VALUES (:k, :v) RETURNING v")
        sent = await self.db.pipeline([(sql, {"k": k, "v": v}) for k, v in pairs])
        return [int(s.rows[0][0]) for s in sent]

    async def backend_pid(self) -> int:
        """The server process of the connection pipelines go through (the last used)."""
        (sent,) = await self.db.pipeline([("SELECT pg_backend_pid()", {})])
        return int(sent.rows[0][0])

    @read_only
    def keys(self, conn: Connection) -> list[str]:
        return [str(k) for (k,) in conn.execute(text("SELECT k FROM pairs ORDER BY k"))]


@pytest.fixture
def pairs(pg_available: bool) -> Iterator[Pairs]:
    if not pg_available:
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database() as url:
        db = Database(url, threads=1, name="pairs")  # one connection: every test reuses it
        try:
            yield Pairs(db)
        finally:
            db.close()


async def test_a_pipeline_commits_whole_or_not_at_all(pairs: Pairs) -> None:
    await pairs.create()
    assert await pairs.put(("a", 1), ("b", 2)) == [1, 2]
    assert await pairs.put(("c", 3)) == [3], "a single statement: its own transaction"
    assert await pairs.db.pipeline([]) == [], "nothing to send: no round trip"
    with pytest.raises(IntegrityError):
        await pairs.put(("d", 4), ("a", 5))  # the second violates the key: the first undone
    assert await pairs.keys() == ["a", "b", "c"]
    pid = await pairs.backend_pid()
    assert await pairs.put(("d", 4), ("e", 5)) == [4, 5], "the connection is usable after"
    assert await pairs.backend_pid() == pid, "and the same one: it went back to the pool"


async def test_a_pipeline_runs_to_its_end_when_its_caller_is_cancelled(pairs: Pairs) -> None:
    """As a transaction in a worker thread does: a COMMIT sent is never abandoned half-read on
    a pooled connection, and the write stands."""
    await pairs.create()
    slow = pairs.db.sql("SELECT pg_sleep(0.3)")
    insert = pairs.db.sql("INSERT INTO pairs (k, v) VALUES (:k, :v)")
    call = asyncio.ensure_future(pairs.db.pipeline([(slow, {}), (insert, {"k": "x", "v": 1})]))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.5)
    assert await pairs.keys() == ["x"]
    assert await pairs.put(("y", 2)) == [2]


async def test_an_idle_pipeline_connection_is_pinged_and_kept(pairs: Pairs) -> None:
    """Idle over PG_PING_IDLE_S, a live connection answers the ping and stays in use."""
    pid = await pairs.backend_pid()
    await asyncio.sleep(PG_PING_IDLE_S + 0.2)
    assert await pairs.backend_pid() == pid


async def test_pipelines_share_at_most_the_pool_size_of_connections(pg_available: bool) -> None:
    if not pg_available:
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database() as url:
        db = Database(url, threads=2, name="bounded")
        try:
            pairs = Pairs(db)
            pids = await asyncio.gather(*(pairs.backend_pid() for _ in range(12)))
            assert len(set(pids)) <= 2
            one_at_a_time = {await pairs.backend_pid() for _ in range(5)}
            assert len(one_at_a_time) == 1, "the last used connection first (LIFO)"
        finally:
            db.close()


async def test_pipeline_is_postgresql_only(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'lite.db'}", threads=1, name="lite")
    try:
        with pytest.raises(RuntimeError, match="PostgreSQL"):
            await db.pipeline([("SELECT 1", {})])
    finally:
        db.close()


async def test_a_pipeline_to_an_unreachable_server_is_an_outage(pg_available: bool) -> None:
    if not pg_available:
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database() as url, TcpProxy("127.0.0.1", make_url(url).port or 5432) as proxy:
        pairs = Pairs(Database(str(make_url(url).set(port=proxy.port)), threads=1, name="p"))
        try:
            await pairs.create()
            proxy.refuse()
            with pytest.raises(OperationalError):
                await pairs.put(("a", 1), ("b", 2))
            proxy.accept()
            assert await pairs.put(("a", 1), ("b", 2)) == [1, 2], "a new connection, after"
            # A pooled connection cut while idle (under PG_PING_IDLE_S: not pinged) fails its
            # next pipeline as an outage, and is dropped: the one after connects anew.
            proxy.refuse()
            proxy.accept()
            with pytest.raises(OperationalError) as cut:
                await pairs.put(("c", 3))
            assert cut.value.connection_invalidated
            assert await pairs.put(("c", 3)) == [3]
        finally:
            pairs.db.close()


async def test_an_idle_connection_the_server_dropped_is_replaced_at_checkout(
    pairs: Pairs,
) -> None:
    """No ping at every checkout (a round trip), but one after PG_PING_IDLE_S of idleness:
    the backend killed meanwhile (a server restart, an idle timeout) costs no failed call."""
    await pairs.create()
    pid = await pairs.backend_pid()
    with postgres_database("killer") as other:
        killer = Database(other, threads=1, name="killer")
        try:
            killed = killer.read(
                lambda c: c.exec_driver_sql(
                    "SELECT pg_terminate_backend(%(p)s)", {"p": pid}
                ).scalar_one()
            )
        finally:
            killer.close()
    assert killed
    await asyncio.sleep(PG_PING_IDLE_S + 0.2)
    assert await pairs.put(("a", 1)) == [1]
    assert await pairs.keys() == ["a"]
