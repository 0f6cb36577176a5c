"""Writing what a paid call owes the books: its settle and its stored reply, never lost.

`settle` writes the hold's release, the real cost and the ledger row in one transaction;
`keep_reply` keeps a request id's reply (`idempotency_keys`). When the database does not take
either within `timeout_s` (refused, locked, away), the write becomes a journal entry:

1. the JetStream journal (`stream_journal.py`), which any replica replays — durable beyond
   this replica and its disk;
2. when JetStream does not take it either (NATS away too), this replica's local journal file
   (`journal.py`, fsync'ed), replayed by this replica or the next process on that disk, and
   moved to JetStream by the sweep as soon as NATS is back;
3. when the disk refuses too, memory (retried by every sweep; lost if the process dies — the
   one case left, logged at ERROR and counted by the pending gauge).

None of them raises into the call: the provider was paid, so the caller gets its reply
whatever the bookkeeping's fate (withholding it would only make the caller ask, and pay,
again). Replays are idempotent: settle on (call_id, attempt), a stored reply on (key, call_id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import Gauge

from quiz_contracts.llm import CompleteReply
from quiz_contracts.llm_journal import JournalEntry, JournalReply
from quiz_llm_gateway.rows import Held, LedgerRow, Repository
from quiz_llm_gateway.settlement.journal import SettleJournal, entry_key, settle_entry, settle_of
from quiz_llm_gateway.settlement.stream_journal import StreamJournal
from quiz_llm_gateway.settlement.writer import SettleWriter
from quiz_servicekit.tasks import TaskSet

log = logging.getLogger(__name__)
T = TypeVar("T")
# While a journal holds entries, a request id's claim first replays them, at most this often.
CATCH_UP_EVERY_S = 1.0


class Ledger:
    """Settles holds, writes ledger rows and keeps replies; nothing paid for is ever dropped."""

    def __init__(
        self,
        repo: Repository,
        journal: SettleJournal,
        timeout_s: float,
        stream: StreamJournal | None = None,
        clock: Callable[[], float] = time.time,
        pending_gauge: Gauge | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.repo = repo
        self.writer = SettleWriter(repo)
        self.journal = journal
        self.stream = stream
        self.timeout_s = timeout_s
        self.clock = clock
        # Raised at each journaled entry, set to the exact figure by every sweep (`pending`).
        self.pending_gauge = pending_gauge
        self.monotonic = monotonic
        self._replaying = asyncio.Lock()
        self._caught_up_at = -CATCH_UP_EVERY_S
        self._unsettled: list[JournalEntry] = []
        self._tasks = TaskSet("ledger")
        self._file_pending = 0

    async def settle(self, held: Held | None, row: LedgerRow) -> int | None:
        """Release `held`, add the row's cost and write it — in the database, or a journal.

        Returns once the entry is durable in one of them (or, all refusing, kept in memory);
        never raises. Runs to the end even when the caller is cancelled (a paid call's record
        is never left half-way). Returns the day's spent + reserved micro-USD just after the
        settle, as the database's settle statement answered it; None when it was journaled
        (the database did not take it: its day row does not know this call).
        """
        return await self._durably(
            lambda: self.writer.settle(held, row), lambda: settle_entry(held, row), row.call_id
        )

    async def keep_reply(
        self, key: str, digest: str, call_id: str, reply: CompleteReply, until: float, now: float
    ) -> None:
        """Keep `reply` under `key` until `until` — in the database, or a journal; never raises."""
        text = reply.model_dump_json()
        kept = JournalReply(key=key, digest=digest, call_id=call_id, reply=reply, until=until)
        await self._durably(
            lambda: self.repo.finish_request(key, digest, call_id, text, until, now),
            lambda: JournalEntry(reply=kept),
            call_id,
        )

    async def record(self, row: LedgerRow) -> None:
        """A row without a hold: a refused call (cost 0)."""
        await self.settle(None, row)

    async def _durably(
        self,
        write: Callable[[], Awaitable[T]],
        entry: Callable[[], JournalEntry],
        call_id: str,
    ) -> T | None:
        # Its own task: the caller cancelled, the write still ends (in the database or a journal).
        return await asyncio.shield(
            self._tasks.spawn(self._write_or_journal(write, entry, call_id))
        )

    async def _write_or_journal(
        self,
        write: Callable[[], Awaitable[T]],
        entry: Callable[[], JournalEntry],
        call_id: str,
    ) -> T | None:
        """The write's result, or None once it was journaled instead."""
        try:
            # The write runs whole in a DB thread; when we stop waiting it may still commit
            # later, which the journal's replay then finds done (both writes are idempotent).
            return await asyncio.wait_for(asyncio.shield(write()), self.timeout_s)
        except Exception as e:
            log.warning("write of call %s not taken (%s): journaled", call_id, type(e).__name__)
        await self._journal(entry())
        return None

    async def _journal(self, entry: JournalEntry) -> None:
        """JetStream, else the local file, else memory; never raises."""
        if self.pending_gauge is not None:
            self.pending_gauge.inc()
        if self.stream is not None:
            try:
                await self.stream.append(entry)
                return
            except Exception as e:
                log.warning("journal stream refused %s (%s): local file", entry_key(entry), e)
        try:
            await self.journal.append(entry)
            self._file_pending += 1
            return
        except Exception:
            log.exception("journal file refused %s: kept in memory only", entry_key(entry))
        self._unsettled.append(entry)

    async def apply(self, entry: JournalEntry) -> None:
        """Write one journal entry to the database (raises what the database raised, or
        TimeoutError after `timeout_s`: a database that hangs is away too)."""
        if entry.reply is not None:
            r = entry.reply
            write = self.repo.finish_request(
                r.key, r.digest, r.call_id, r.reply.model_dump_json(), r.until, self.clock()
            )
            await asyncio.wait_for(write, self.timeout_s)
        else:
            await asyncio.wait_for(self.repo.settle(*settle_of(entry)), self.timeout_s)

    async def _apply_or_promote(self, entry: JournalEntry) -> None:
        """A local entry goes to the database, or else to JetStream (durable beyond us)."""
        try:
            await self.apply(entry)
        except Exception:
            if self.stream is None:
                raise
            await self.stream.append(entry)  # raises too when NATS is away: the file keeps it

    async def know_database(self) -> None:
        """Read the database's id once: the JetStream journal's subject (one per database)."""
        stream = self.stream
        if stream is not None and stream.database_id is None:
            stream.database_id = await self.repo.database_id()

    def maybe_pending(self) -> bool:
        """Whether a journal may hold entries (as last counted, or journaled since)."""
        stream = self.stream is not None and self.stream.pending > 0
        return stream or self._file_pending > 0 or bool(self._unsettled)

    async def catch_up(self) -> None:
        """Replay the journals now (at most once per CATCH_UP_EVERY_S; never raises).

        Run before a request id is claimed while a journal holds entries: a reply journaled
        during an outage longer than its claim (deadline + grace) is then back in
        `idempotency_keys` before anyone could claim the id again and pay a second time.
        """
        if (
            self.monotonic() - self._caught_up_at < CATCH_UP_EVERY_S
            and not self._replaying.locked()
        ):
            return
        async with self._replaying:
            if self.monotonic() - self._caught_up_at < CATCH_UP_EVERY_S:
                return  # another call replayed while we waited
            self._caught_up_at = self.monotonic()
            try:
                await self._replay()
                await self.pending()
            except Exception as e:
                log.warning("journal catch-up failed (%s)", type(e).__name__)

    async def retry_unsettled(self) -> int:
        """Replay the JetStream journal, the journal files (this process's and dead ones'),
        then what is in memory; returns how many entries were taken."""
        async with self._replaying:
            self._caught_up_at = self.monotonic()
            return await self._replay()

    async def _replay(self) -> int:
        landed = 0
        if self.stream is not None:
            try:
                landed += await self.stream.replay(self.apply)
            except Exception as e:
                log.warning("journal stream replay failed (%s)", type(e).__name__)
        landed += await self.journal.replay(self._apply_or_promote)
        pending, self._unsettled = self._unsettled, []
        for entry in pending:
            try:
                await self._apply_or_promote(entry)
                landed += 1
            except Exception:
                try:
                    await self.journal.append(entry)
                    landed += 1
                except Exception:
                    log.warning("entry %s still only in memory", entry_key(entry))
                    self._unsettled.append(entry)
        return landed

    async def pending(self) -> int:
        """Entries known to be in a journal and not yet in the database: this database's in
        the JetStream journal (shared by every replica), this disk's journal files, memory."""
        shared = 0
        if self.stream is not None:
            try:
                shared = await self.stream.count()
            except Exception:
                shared = max(self.stream.pending, 0)  # NATS away: the last count read
        try:
            self._file_pending = await asyncio.to_thread(self.journal.count)
        except OSError:
            pass
        total = shared + self._file_pending + len(self._unsettled)
        if self.pending_gauge is not None:
            self.pending_gauge.set(total)
        return total

    async def drain(self) -> None:
        """Wait for settles in hand (at shutdown), then stop the writer."""
        await self._tasks.wait(self.timeout_s * 2 + 5)
        await self.writer.close()

    def close(self) -> None:
        """Release the journal's lock."""
        self.journal.close()
