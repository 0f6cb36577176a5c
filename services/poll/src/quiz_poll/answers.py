"""The answer writer: participants' answers stored by group commit.

One job: a phone's answer waits at most for the transaction in progress, and then goes with
every answer that arrived meanwhile (one transaction, one fsync, at most `ANSWER_BATCH_MAX`),
instead of 8 threads queueing on SQLite's writer lock one answer each. `save()` returns the
poll's version its answer committed at, or raises the `ContractError` that refused it (the
rules of `PollRepository.save_answers`: no brainstorm, closed, frozen).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from quiz_contracts.errors import ContractError
from quiz_poll.repository import AnswerToSave, PollRepository

# Answers written in one transaction at most (a burst of a lecture hall's phones).
ANSWER_BATCH_MAX = 256


class AnswerWriter:
    """Group commit of answers (see the module docstring); `clock` (epoch s) dates them."""

    def __init__(self, repo: PollRepository, clock: Callable[[], float]) -> None:
        self.repo = repo
        self.clock = clock
        self._queue: list[tuple[AnswerToSave, asyncio.Future[int]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def save(self, item: AnswerToSave) -> int:
        """Store one answer through the group commit; its version, or its ContractError."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())
        return await future

    async def _write(self) -> None:
        while self._queue:
            batch, self._queue = (
                self._queue[:ANSWER_BATCH_MAX],
                self._queue[ANSWER_BATCH_MAX:],
            )
            try:
                results = await self.repo.save_answers([item for item, _ in batch], self.clock())
            except BaseException as e:  # the whole transaction failed: each caller hears why
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                if isinstance(e, asyncio.CancelledError):
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, ContractError):
                    future.set_exception(result)
                else:
                    future.set_result(result)
