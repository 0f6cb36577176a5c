"""Group commit: writes queued during a transaction share the next; each caller hears its own."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from quiz_servicekit.group_commit import GroupCommit


class Table:
    """A real SQLite table (`name` NOT NULL) written one transaction per call, in a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL)")
        self.transactions: list[int] = []  # the size of each transaction, committed or not

    def _insert(self, names: list[str | None]) -> list[int]:
        self.transactions.append(len(names))
        db = sqlite3.connect(self.path)
        try:
            with db:  # one transaction: all rows or none
                return [
                    int(db.execute("INSERT INTO t (name) VALUES (?)", (n,)).lastrowid or 0)
                    for n in names
                ]
        finally:
            db.close()

    async def insert(self, names: list[str | None]) -> list[int]:
        return await asyncio.to_thread(self._insert, names)

    def names(self) -> list[str]:
        with sqlite3.connect(self.path) as db:
            return [r[0] for r in db.execute("SELECT name FROM t ORDER BY name")]


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Table]:
    yield Table(tmp_path / "t.db")


class Gate:
    """A `many` that holds each batch until released, recording what it was given."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.open = asyncio.Event()
        self.entered = asyncio.Event()

    async def many(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        self.entered.set()
        await self.open.wait()
        return [i * 10 for i in items]


async def test_writes_queued_during_a_transaction_share_the_next_and_each_gets_its_result() -> None:
    gate = Gate()
    writer = GroupCommit[int, int]("t", gate.many)
    first = asyncio.create_task(writer.submit(0))
    await gate.entered.wait()  # the first write's transaction is running
    rest = [asyncio.create_task(writer.submit(i)) for i in range(1, 6)]
    await asyncio.sleep(0)
    assert writer.queued == 5
    assert not first.done()  # not resolved before its own write committed
    gate.open.set()
    assert await first == 0
    assert await asyncio.gather(*rest) == [10, 20, 30, 40, 50]
    assert gate.batches == [[0], [1, 2, 3, 4, 5]]


async def test_a_caller_is_resolved_only_once_its_own_batch_committed() -> None:
    gate = Gate()
    writer = GroupCommit[int, int]("t", gate.many)
    first = asyncio.create_task(writer.submit(1))
    await gate.entered.wait()
    second = asyncio.create_task(writer.submit(2))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not first.done() and not second.done()
    gate.open.set()
    assert await asyncio.gather(first, second) == [10, 20]


async def test_no_batch_is_larger_than_max_batch(table: Table) -> None:
    writer = GroupCommit[str | None, int]("t", table.insert, max_batch=128)
    ids = await asyncio.gather(*(writer.submit(f"n{i:03d}") for i in range(300)))
    assert len(set(ids)) == 300
    assert table.transactions == [128, 128, 44]
    assert table.names() == [f"n{i:03d}" for i in range(300)]


async def test_a_failed_batch_is_retried_entry_by_entry_so_a_bad_entry_fails_alone(
    table: Table,
) -> None:
    writer = GroupCommit[str | None, int]("t", table.insert)
    names: list[str | None] = [f"n{i:02d}" for i in range(20)]
    names[7] = None  # NOT NULL: this entry cannot be written, and takes its transaction down
    results = await asyncio.gather(*(writer.submit(n) for n in names), return_exceptions=True)
    assert isinstance(results[7], sqlite3.IntegrityError)
    assert all(isinstance(r, int) for i, r in enumerate(results) if i != 7)
    assert table.names() == [n for n in names if n is not None]
    # The batch of 20 failed whole, then each entry went alone.
    assert table.transactions == [20] + [1] * 20


async def test_without_retry_each_every_caller_of_a_failed_batch_gets_its_error(
    table: Table,
) -> None:
    writer = GroupCommit[str | None, int]("t", table.insert, retry_each=False)
    names: list[str | None] = ["a", None, "c"]
    results = await asyncio.gather(*(writer.submit(n) for n in names), return_exceptions=True)
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results)
    assert table.names() == []
    assert table.transactions == [3]


async def test_one_is_used_for_a_lone_write_and_for_the_retry() -> None:
    calls: list[tuple[str, list[int]]] = []

    async def many(items: list[int]) -> list[int]:
        calls.append(("many", items))
        if len(items) > 1:
            raise OSError("batch refused")
        return items

    async def one(item: int) -> int:
        calls.append(("one", [item]))
        if item == 2:
            raise ValueError("bad entry")
        return -item

    writer = GroupCommit[int, int]("t", many, one=one)
    assert await writer.submit(9) == -9
    results = await asyncio.gather(*(writer.submit(i) for i in (1, 2, 3)), return_exceptions=True)
    assert results[0] == -1 and results[2] == -3
    assert isinstance(results[1], ValueError)
    assert calls == [("one", [9]), ("many", [1, 2, 3]), ("one", [1]), ("one", [2]), ("one", [3])]


async def test_a_caller_that_stops_waiting_still_has_its_write_committed() -> None:
    gate = Gate()
    writer = GroupCommit[int, int]("t", gate.many)
    first = asyncio.create_task(writer.submit(1))
    await gate.entered.wait()
    gone = asyncio.create_task(writer.submit(2))
    await asyncio.sleep(0)  # queued behind the batch in hand
    gone.cancel()
    gate.open.set()
    assert await first == 10
    assert await writer.submit(3) == 30
    assert [i for batch in gate.batches for i in batch] == [1, 2, 3]
    assert gone.cancelled()


async def test_results_not_matching_the_batch_fail_every_caller() -> None:
    async def many(items: list[int]) -> list[int]:
        return items[:-1]

    writer = GroupCommit[int, int]("t", many)
    results = await asyncio.gather(*(writer.submit(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_close_cancels_the_writes_in_hand_and_a_later_submit_writes_again() -> None:
    gate = Gate()
    writer = GroupCommit[int, int]("t", gate.many)
    in_hand = asyncio.create_task(writer.submit(1))
    await gate.entered.wait()
    queued = asyncio.create_task(writer.submit(2))
    await asyncio.sleep(0)
    await writer.close()
    results = await asyncio.gather(in_hand, queued, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    gate.open.set()
    assert await writer.submit(3) == 30
    await writer.close()
