"""One settle writer per process: group commit (issue 10, performance).

Calls hand their settles to the writer and wait for them; while one batch's transaction runs in
a database thread, the next settles queue, and go together in the next transaction (up to
`MAX_BATCH`). Under load this turns N transactions (N thread hops, N BEGIN IMMEDIATE/COMMIT,
N waits for SQLite's write lock among the DB threads) into a few; at concurrency 1 it is one
transaction per settle, as before. A caller still gets its reply only after its own settle
committed (or, when the database refuses, was journaled by the Ledger).

A batch that fails is retried entry by entry, so one bad entry never fails the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from quiz_llm_gateway.repository import Held, LedgerRow, Repository

log = logging.getLogger(__name__)
MAX_BATCH = 128
Entry = tuple[Held | None, LedgerRow, "asyncio.Future[None]"]


class SettleWriter:
    """Batches settles into few transactions; `settle()` returns once its entry committed."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._pending: list[Entry] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def settle(self, held: Held | None, row: LedgerRow) -> None:
        """Queue the settle and wait for its commit (raises what its write raised)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((held, row, future))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="settle-writer")
        await future

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                await self._write(batch)

    async def _write(self, batch: list[Entry]) -> None:
        try:
            if len(batch) == 1:
                held, row, _ = batch[0]
                await self.repo.settle(held, row)
            else:
                await self.repo.settle_many([(h, r) for h, r, _ in batch])
        except Exception as e:
            if len(batch) == 1:
                _resolve(batch[0][2], e)
                return
            log.warning("settle batch of %d failed (%s); one by one", len(batch), e)
            for held, row, future in batch:
                try:
                    await self.repo.settle(held, row)
                except Exception as one:
                    _resolve(future, one)
                else:
                    _resolve(future, None)
            return
        for _, _, future in batch:
            _resolve(future, None)

    async def close(self) -> None:
        """Stop the writer task once nothing is queued."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _resolve(future: asyncio.Future[None], error: Exception | None) -> None:
    if future.done():
        return  # its caller stopped waiting (timeout): the write still counts
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
