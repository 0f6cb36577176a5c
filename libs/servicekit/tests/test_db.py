"""The one database module on SQLite and PostgreSQL: one transaction per operation, typed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from quiz_servicekit.db import Database, after_commit, read_only, transaction
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
            proxy.accept()
            assert await db.ping()
        finally:
            db.close()
