"""The settle writer of the gateway's group commit (issue 10, performance).

A `quiz_servicekit.group_commit.GroupCommit` over the repository: calls hand their settle to
the writer and wait for its result; settles arriving while a transaction runs go together in
the next one. A settle returns once it is durable (before its reply). A failed batch is retried
entry by entry, so one bad entry never fails the others. The admission and rate writers are
`admission/writers.py`.
"""

from __future__ import annotations

from quiz_llm_gateway.rows import Held, LedgerRow, Repository
from quiz_servicekit.group_commit import GroupCommit

SettleEntry = tuple[Held | None, LedgerRow]


class SettleWriter(GroupCommit[SettleEntry, int]):
    """Settles (hold released, cost added, ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        async def one(entry: SettleEntry) -> int:
            return await repo.settle(*entry)

        super().__init__("settle", repo.settle_many, one=one)

    async def settle(self, held: Held | None, row: LedgerRow) -> int:
        """Write one settle; returns once it committed, with its day's spent + reserved
        micro-USD just after it (`Repository.settle_many`)."""
        return await self.submit((held, row))
