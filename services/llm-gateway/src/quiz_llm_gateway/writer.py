"""The gateway's group-commit writers (issue 10, performance): admissions, rate checks, settles.

Each is a `quiz_servicekit.group_commit.GroupCommit` over the repository: calls hand their
write to the writer and wait for its result; writes arriving while a transaction runs go
together in the next one. A caller's admission returns once its hold committed (before its
provider request), a settle once it is durable (before its reply). A failed batch is retried
entry by entry, so one bad entry never fails the others.
"""

from __future__ import annotations

from quiz_llm_gateway.repository import Admission, AdmitArgs, Held, LedgerRow, Repository
from quiz_servicekit.group_commit import GroupCommit

SettleEntry = tuple[Held | None, LedgerRow]


class SettleWriter(GroupCommit[SettleEntry, None]):
    """Settles (hold released, cost added, ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        async def one(entry: SettleEntry) -> None:
            await repo.settle(*entry)

        async def many(entries: list[SettleEntry]) -> list[None]:
            await repo.settle_many(entries)
            return [None] * len(entries)

        super().__init__("settle", many, one=one)

    async def settle(self, held: Held | None, row: LedgerRow) -> None:
        """Write one settle; returns once it committed."""
        await self.submit((held, row))


class RateWriter(GroupCommit[AdmitArgs, Admission]):
    """Rate checks of calls held in this replica's slice of the cap (issue 24), in batches."""

    def __init__(self, repo: Repository) -> None:
        super().__init__("rate", repo.admit_rates)


class AdmitWriter(GroupCommit[AdmitArgs, Admission]):
    """Admissions (rate check, hold under the cap, or the refusal's ledger row) in batches."""

    def __init__(self, repo: Repository) -> None:
        super().__init__("admit", repo.admit_many, one=repo.admit_one)
