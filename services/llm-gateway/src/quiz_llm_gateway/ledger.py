"""Writing the spend: settle with retries; a write that keeps failing waits for the sweep."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from quiz_llm_gateway.repository import Held, LedgerRow, Repository

log = logging.getLogger(__name__)
SETTLE_RETRIES = 5


class Ledger:
    """Settles holds and writes ledger rows; nothing the provider was paid for is ever dropped."""

    def __init__(self, repo: Repository, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.repo = repo
        self.sleep = sleep
        self._unsettled: list[tuple[Held | None, LedgerRow]] = []

    async def settle(self, held: Held | None, row: LedgerRow) -> None:
        """Release `held`, add the row's cost and write it; retried, then kept for the sweep."""
        for attempt in range(SETTLE_RETRIES):
            try:
                # Shielded: a cancelled caller must not lose the spend record half-way.
                await asyncio.shield(self.repo.settle(held, row))
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("settle of call %s failed (try %d)", row.call_id, attempt + 1)
                await self.sleep(min(0.05 * 2**attempt, 1.0))
        log.error("settle of call %s kept failing; queued for the sweep", row.call_id)
        self._unsettled.append((held, row))

    async def record(self, row: LedgerRow) -> None:
        """A row without a hold: a refused call (cost 0)."""
        await self.settle(None, row)

    async def retry_unsettled(self) -> None:
        """Write what kept failing; what fails again waits for the next sweep."""
        pending, self._unsettled = self._unsettled, []
        for held, row in pending:
            try:
                await self.repo.settle(held, row)
            except Exception:
                log.warning("settle of call %s still failing", row.call_id)
                self._unsettled.append((held, row))
