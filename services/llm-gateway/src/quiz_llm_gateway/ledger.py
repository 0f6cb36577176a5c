"""Writing the spend: durable before the caller's reply, in the database or the journal.

`settle` writes the hold's release, the real cost and the ledger row in one transaction; when
the database does not take it within `timeout_s` (refused, locked, away), the entry goes to
the local write-ahead journal (fsync'ed) instead, and the sweep replays it. Only when the
journal cannot be written either is the entry kept in memory, and the call answers `internal`
(its spend is not durable, so its reply is not sent as if it were).
"""

from __future__ import annotations

import asyncio
import logging

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_llm_gateway.journal import SettleJournal
from quiz_llm_gateway.repository import Held, LedgerRow, Repository
from quiz_llm_gateway.writer import SettleWriter

log = logging.getLogger(__name__)


class Ledger:
    """Settles holds and writes ledger rows; nothing the provider was paid for is ever dropped."""

    def __init__(self, repo: Repository, journal: SettleJournal, timeout_s: float) -> None:
        self.repo = repo
        self.writer = SettleWriter(repo)
        self.journal = journal
        self.timeout_s = timeout_s
        self._unsettled: list[tuple[Held | None, LedgerRow]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def settle(self, held: Held | None, row: LedgerRow) -> None:
        """Release `held`, add the row's cost and write it — in the database, or the journal.

        Returns once the entry is durable in one of them. Runs to the end even when the caller
        is cancelled (a paid call's record is never left half-way).
        """
        task = asyncio.ensure_future(self._settle(held, row))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.shield(task)

    async def _settle(self, held: Held | None, row: LedgerRow) -> None:
        try:
            # The write runs whole in a DB thread; when we stop waiting it may still commit
            # later, which the journal's replay then finds done (settle is idempotent).
            await asyncio.wait_for(asyncio.shield(self.writer.settle(held, row)), self.timeout_s)
            return
        except Exception as e:
            log.warning(
                "settle of call %s attempt %d not written (%s): journaled",
                row.call_id,
                row.attempt,
                type(e).__name__,
            )
        try:
            await self.journal.append(held, row)
        except Exception as e:
            log.exception("journal write of call %s failed: kept in memory", row.call_id)
            self._unsettled.append((held, row))
            raise ContractError(
                ErrorCode.internal, "the call's spend could not be recorded durably"
            ) from e

    async def record(self, row: LedgerRow) -> None:
        """A row without a hold: a refused call (cost 0)."""
        await self.settle(None, row)

    async def retry_unsettled(self) -> int:
        """Replay the journals (this process's and dead ones'), then what is in memory."""
        landed = await self.journal.replay(self.repo.settle)
        pending, self._unsettled = self._unsettled, []
        for held, row in pending:
            try:
                await self.repo.settle(held, row)
                landed += 1
            except Exception:
                log.warning("settle of call %s still failing", row.call_id)
                self._unsettled.append((held, row))
        return landed

    async def drain(self) -> None:
        """Wait for settles in hand (at shutdown), then stop the writer."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.timeout_s + 5)
        await self.writer.close()

    def close(self) -> None:
        """Release the journal's lock."""
        self.journal.close()
