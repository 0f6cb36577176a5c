"""Group commit: the writes that arrive while one transaction runs share the next one.

Callers hand their write (an admission, a settle, a poll answer) to `submit()` and wait for its
result. One writer task per `GroupCommit` writes at a time: while its transaction runs (in a
database thread), the next writes queue, and go together in the next transaction, at most
`max_batch` of them. Under load this turns N transactions (N thread hops, N BEGIN/COMMIT, N
waits for SQLite's write lock) into a few; at concurrency 1 it is one transaction per write.

Semantics:
- Each caller is resolved only once ITS OWN write committed (a hold exists before its provider
  request, a settle is durable before its reply, an answer is stored before it is counted).
- Results come back in the batch's order: `many(items)[i]` is the result of `items[i]`.
- A batch whose transaction fails is, by default (`retry_each=True`), written again entry by
  entry, so one bad entry fails only its own caller; with `retry_each=False` every caller of
  the batch gets the batch's error (for a writer whose entries cannot fail alone).
- A caller that stops waiting (cancelled, timed out) does not take its write back: it still
  commits with its batch.
- `close()` cancels the writer task: the callers of the batch in hand and of the queue get
  `CancelledError`. A later `submit()` starts a writer again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
# The default largest batch: past it, one transaction would hold the write lock too long.
MAX_BATCH = 128
I = TypeVar("I")  # noqa: E741 - the item written
R = TypeVar("R")  # its result


class GroupCommit(Generic[I, R]):
    """Batches writes into few transactions; `submit()` returns once its entry committed.

    `many(items) -> results` writes a batch in one transaction (one result per item, in order);
    `one(item) -> result` writes a single entry, used for a batch of one and for the
    entry-by-entry retry (default: `many([item])[0]`). `name` labels the task and the logs.
    """

    def __init__(
        self,
        name: str,
        many: Callable[[list[I]], Awaitable[list[R]]],
        *,
        one: Callable[[I], Awaitable[R]] | None = None,
        max_batch: int = MAX_BATCH,
        retry_each: bool = True,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.name = name
        self.max_batch = max_batch
        self.retry_each = retry_each
        self._many = many
        self._one = one
        self._queue: list[tuple[I, asyncio.Future[R]]] = []
        self._writer: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        """Writes waiting for a transaction (not counting the batch being written)."""
        return len(self._queue)

    async def submit(self, item: I) -> R:
        """Queue `item`'s write and wait for its commit: its result, or what its write raised."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        # The writer ends when it finds the queue empty, without awaiting in between: a task
        # seen not done here will still see this item.
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queue(), name=f"{self.name}-writer")
        return await future

    async def close(self) -> None:
        """Stop the writer task; the writes in hand and queued fail with CancelledError."""
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        queued, self._queue = self._queue, []
        for _, future in queued:
            future.cancel()

    async def _write_queue(self) -> None:
        while self._queue:
            batch = self._queue[: self.max_batch]
            self._queue = self._queue[self.max_batch :]
            try:
                await self._write(batch)
            except asyncio.CancelledError:
                for _, future in batch:
                    future.cancel()
                raise

    async def _write_one(self, item: I) -> R:
        if self._one is not None:
            return await self._one(item)
        (result,) = await self._many([item])
        return result

    async def _write(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        if len(batch) == 1:
            item, future = batch[0]
            try:
                _resolve(future, await self._write_one(item))
            except Exception as e:
                _fail(future, e)
            return
        try:
            results = await self._many([item for item, _ in batch])
        except Exception as e:
            if not self.retry_each:
                log.warning("%s batch of %d failed (%s)", self.name, len(batch), e)
                for _, future in batch:
                    _fail(future, e)
                return
            log.warning("%s batch of %d failed (%s); one by one", self.name, len(batch), e)
            for item, future in batch:
                try:
                    _resolve(future, await self._write_one(item))
                except Exception as one:
                    _fail(future, one)
            return
        if len(results) != len(batch):  # a bug of `many`: no caller can be told its result
            error = RuntimeError(f"{self.name}: {len(results)} results for {len(batch)} writes")
            for _, future in batch:
                _fail(future, error)
            return
        for (_, future), result in zip(batch, results, strict=True):
            _resolve(future, result)


def _resolve(future: asyncio.Future[R], result: R) -> None:
    if not future.done():  # its caller may have stopped waiting: the write still counts
        future.set_result(result)


def _fail(future: asyncio.Future[R], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)
