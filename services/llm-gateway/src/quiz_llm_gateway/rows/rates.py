"""The per-person rate log (`rate_events`): the sliding-window check of an admission, the
rate-only check of a call held in a slice (issue 24), the pruning of old events."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete

from quiz_llm_gateway.domain.ratelimit import RateDecision, decide
from quiz_llm_gateway.rows.base import (
    RATE,
    Admission,
    AdmitArgs,
    RateKey,
    Tables,
)
from quiz_servicekit.db import transaction


class RateRows(Tables):
    """The rate events of (person, purpose) keys."""

    async def admit_rates(self, batch: list[AdmitArgs]) -> list[Admission]:
        """The per-person rate check alone, for calls held in this replica's slice of the cap
        (issue 24): each admitted call's event inserted, each refused one's ledger row written.

        On PostgreSQL every key's advisory lock is taken first, in sorted order (exact across
        replicas, no cycle), and the transaction commits with `synchronous_commit = off`: it
        is visible to every other transaction at once (the count stays exact), only its
        durability waits for the WAL writer (≤ 3 × wal_writer_delay). A server crash in that
        window forgets those rate events (and refusal rows, cost 0) — a person may get that
        many calls more in the minute, never money: no hold and no spend is in this
        transaction. (SQLite's WAL with `synchronous=NORMAL` commits that way already.) The
        whole batch is one round trip there (`_admit_rates_pg`, issue 32).
        """
        if self.db.dialect == "postgresql":
            return await self._admit_rates_pg(batch)
        return await self._admit_rates_lite(batch)

    @transaction
    def _admit_rates_lite(self, conn: Connection, batch: list[AdmitArgs]) -> list[Admission]:
        return [self._admit_rate_in(conn, a) for a in batch]

    async def _admit_rates_pg(self, batch: list[AdmitArgs]) -> list[Admission]:
        """`admit_rates` on PostgreSQL in one round trip (`Database.pipeline`): one `rate_admit`
        statement per call; a batch of several keys takes every key's lock first, in key order
        (the first also lowering synchronous_commit), in one transaction. A call alone is one
        statement, its own transaction."""
        q = self._q
        keys = sorted({a.rate.key for a in batch if a.rate is not None})
        if not keys:
            return [Admission(True) for _ in batch]
        locks: list[tuple[str, dict[str, Any]]] = []
        if len(keys) > 1:
            locks = [
                (q["rate_lock_async" if i == 0 else "rate_lock"], {"key": key})
                for i, key in enumerate(keys)
            ]
        statements = list(locks)
        for a in batch:
            rate = a.rate
            if rate is None:
                continue
            refusal = a.refusal.model_copy(update={"error_code": "rate_limited"})
            params = self._ledger_params(refusal)
            params.update(
                rate_key=rate.key, rate_at=a.now, since=a.now - rate.window_s, limit=rate.limit
            )
            statements.append((q["rate_admit"], params))
        answers = iter((await self.db.pipeline(statements))[len(locks) :])
        out: list[Admission] = []
        for a in batch:
            if a.rate is None:
                out.append(Admission(True))
                continue
            admitted, times, counted = next(answers).rows[0]
            if admitted:
                out.append(Admission(True, counted=int(counted)))
                continue
            decision = decide(list(times or []), a.rate.limit, a.now, a.rate.window_s)
            out.append(Admission(False, "rate_limited", decision.retry_after_s))
        return out

    def _admit_rate_in(self, conn: Connection, a: AdmitArgs) -> Admission:
        if a.rate is None:
            return Admission(True)
        rate, q = a.rate, self._q
        params = {"key": rate.key, "at": a.now, "since": a.now - rate.window_s}
        counted = int(conn.exec_driver_sql(q["rate_count"], params).scalar_one())
        if counted < rate.limit:
            conn.exec_driver_sql(q["rate_insert"], params)
            return Admission(True, counted=counted)
        times = [t for (t,) in conn.exec_driver_sql(q["rate_times"], params)]
        decision = decide(times, rate.limit, a.now, rate.window_s)
        row = a.refusal.model_copy(update={"error_code": "rate_limited"})
        conn.exec_driver_sql(q["ledger"], self._ledger_params(row))
        return Admission(False, "rate_limited", decision.retry_after_s)

    def _rate_check(self, conn: Connection, rate: RateKey, now: float) -> tuple[RateDecision, int]:
        """Sliding log: fewer than `limit` events in (now - window, now] admits one more; and
        how many there were."""
        q = self._q
        if self.db.dialect == "postgresql":
            # Serialises the count-then-insert of one key across replicas.
            conn.exec_driver_sql(q["rate_lock"], {"key": rate.key})
        since = now - rate.window_s
        params = {"key": rate.key, "since": since}
        times = [t for (t,) in conn.exec_driver_sql(q["rate_times"], params)]
        return decide(times, rate.limit, now, rate.window_s), len(times)

    @transaction
    def prune_rate_events(self, conn: Connection, before: float) -> int:
        """Forget rate events that left every window (keys not seen again are never pruned)."""
        return conn.execute(delete(RATE).where(RATE.c.at <= before)).rowcount
