"""Group commit: one writer per kind of write per process (issue 10, performance).

Calls hand their write (an admission, a settle) to the writer and wait for its result; while
one batch's transaction runs in a database thread, the next writes queue, and go together in
the next transaction (up to `MAX_BATCH`). Under load this turns N transactions (N thread hops,
N BEGIN IMMEDIATE/COMMIT, N waits for SQLite's write lock among the DB threads) into a few; at
concurrency 1 it is one transaction per write, as before. Each caller still gets its result
only once its own write committed: a hold exists before its provider request, a settle is
durable before its reply.

A batch that fails is retried entry by entry, so one bad entry never fails the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from quiz_llm_gateway.repository import Admission, AdmitArgs, Held, LedgerRow, Repository

log = logging.getLogger(__name__)
MAX_BATCH = 128
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class GroupCommit(Generic[I, R]):
    """Batches writes into few transactions; `submit()` returns once its entry committed."""

    def __init__(
        self,
        name: str,
        one: Callable[[I], Awaitable[R]],
        many: Callable[[list[I]], Awaitable[list[R]]],
    ) -> None:
        self.name = name
        self._one = one
        self._many = many
        self._pending: list[tuple[I, asyncio.Future[R]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: I) -> R:
        """Queue the write and wait for its commit (raises what its write raised)."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"{self.name}-writer")
        return await future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                await self._write(batch)

    async def _write(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        if len(batch) == 1:
            item, future = batch[0]
            try:
                _resolve(future, await self._one(item))
            except Exception as e:
                _fail(future, e)
            return
        try:
            results = await self._many([item for item, _ in batch])
        except Exception as e:
            log.warning("%s batch of %d failed (%s); one by one", self.name, len(batch), e)
            for item, future in batch:
                try:
                    _resolve(future, await self._one(item))
                except Exception as one:
                    _fail(future, one)
            return
        for (_, future), result in zip(batch, results, strict=True):
            _resolve(future, result)

    async def close(self) -> None:
        """Stop the writer task (call once nothing is queued)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _resolve(future: asyncio.Future[R], result: R) -> None:
    if not future.done():  # its caller may have stopped waiting: the write still counts
        future.set_result(result)


def _fail(future: asyncio.Future[R], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)


SettleEntry = tuple[Held | None, LedgerRow]


class SettleWriter(GroupCommit[SettleEntry, None]):
    """Settles (hold released, cost added, ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        async def one(entry: SettleEntry) -> None:
            await repo.settle(*entry)

        async def many(entries: list[SettleEntry]) -> list[None]:
            await repo.settle_many(entries)
            return [None] * len(entries)

        super().__init__("settle", one, many)

    async def settle(self, held: Held | None, row: LedgerRow) -> None:
        """Write one settle; returns once it committed."""
        await self.submit((held, row))


class RateWriter(GroupCommit[AdmitArgs, Admission]):
    """Rate checks of calls held in this replica's slice of the cap (issue 24), in batches."""

    def __init__(self, repo: Repository) -> None:
        async def one(args: AdmitArgs) -> Admission:
            [admission] = await repo.admit_rates([args])
            return admission

        super().__init__("rate", one, repo.admit_rates)


class AdmitWriter(GroupCommit[AdmitArgs, Admission]):
    """Admissions (rate check, hold under the cap, or the refusal's ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        async def one(args: AdmitArgs) -> Admission:
            return await repo.admit_one(args)

        super().__init__("admit", one, repo.admit_many)
