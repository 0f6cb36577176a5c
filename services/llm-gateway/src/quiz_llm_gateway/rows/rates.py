"""The per-person rate log (`rate_events`): the sliding-window check of an admission, the
rate-only check of a call held in a slice (issue 24), the pruning of old events."""

from __future__ import annotations

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

    @transaction
    def admit_rates(self, conn: Connection, batch: list[AdmitArgs]) -> list[Admission]:
        """The per-person rate check alone, for calls held in this replica's slice of the cap
        (issue 24): each admitted call's event inserted, each refused one's ledger row written.

        On PostgreSQL every key's advisory lock is taken first, in sorted order (exact across
        replicas, no cycle), and the transaction commits with `synchronous_commit = off`: it
        is visible to every other transaction at once (the count stays exact), only its
        durability waits for the WAL writer (≤ 3 × wal_writer_delay). A server crash in that
        window forgets those rate events — a person may get that many calls more in the
        minute, never money: no hold is in this transaction. (SQLite's WAL with
        `synchronous=NORMAL` commits that way already.)
        """
        q = self._q
        if self.db.dialect == "postgresql":
            keys = sorted({a.rate.key for a in batch if a.rate is not None})
            if not keys:
                conn.exec_driver_sql(q["async_commit"])
            for i, key in enumerate(keys):
                conn.exec_driver_sql(q["rate_lock_async" if i == 0 else "rate_lock"], {"key": key})
        return [self._admit_rate_in(conn, a) for a in batch]

    def _admit_rate_in(self, conn: Connection, a: AdmitArgs) -> Admission:
        if a.rate is None:
            return Admission(True)
        rate, q = a.rate, self._q
        params = {"key": rate.key, "at": a.now, "since": a.now - rate.window_s}
        if conn.exec_driver_sql(q["rate_admit"], {**params, "limit": rate.limit}).rowcount == 1:
            return Admission(True)
        times = [t for (t,) in conn.exec_driver_sql(q["rate_times"], params)]
        decision = decide(times, rate.limit, a.now, rate.window_s)
        row = a.refusal.model_copy(update={"error_code": "rate_limited"})
        conn.exec_driver_sql(q["ledger"], self._ledger_params(row))
        return Admission(False, "rate_limited", decision.retry_after_s)

    def _rate_check(self, conn: Connection, rate: RateKey, now: float) -> RateDecision:
        """Sliding log: fewer than `limit` events in (now - window, now] admits one more."""
        q = self._q
        if self.db.dialect == "postgresql":
            # Serialises the count-then-insert of one key across replicas.
            conn.exec_driver_sql(q["rate_lock"], {"key": rate.key})
        since = now - rate.window_s
        params = {"key": rate.key, "since": since}
        times = [t for (t,) in conn.exec_driver_sql(q["rate_times"], params)]
        return decide(times, rate.limit, now, rate.window_s)

    @transaction
    def prune_rate_events(self, conn: Connection, before: float) -> int:
        """Forget rate events that left every window (keys not seen again are never pruned)."""
        return conn.execute(delete(RATE).where(RATE.c.at <= before)).rowcount
