"""Admissions and holds (`budget_days`, `reservations`): the rate check and the hold under the
day's cap in one transaction, or the refusal's ledger row; expired holds released; open holds
read for usage and the gauges."""

from __future__ import annotations

from datetime import date

from sqlalchemy import Connection, delete, func, select, update

from quiz_llm_gateway.rows.base import (
    BUDGET,
    RESERVATIONS,
    SWEEP_BATCH,
    Admission,
    AdmitArgs,
    Held,
    HeldRow,
    LedgerRow,
    RateKey,
)
from quiz_llm_gateway.rows.rates import RateRows
from quiz_servicekit.db import after_commit, read_only, transaction


class HoldRows(RateRows):
    """The holds of calls admitted on their own (not from a slice): one conditional UPDATE of the
    day row each, under the rate check of `RateRows`."""

    @transaction
    def admit(
        self,
        conn: Connection,
        *,
        held: Held | None,
        call_id: str,
        request_id: str | None,
        purpose: str,
        has_person: bool,
        cap_micros: int,
        now: float,
        expires_at: float,
        rate: RateKey | None,
        refusal: LedgerRow,
    ) -> Admission:
        """Rate check, then hold the worst case if it fits under the cap: one transaction.

        A refusal writes its ledger row (`refusal` with the error code) in the same transaction.
        """
        args = AdmitArgs(
            held,
            call_id,
            request_id,
            purpose,
            has_person,
            cap_micros,
            now,
            expires_at,
            rate,
            refusal,
        )
        return self._admit_in(conn, args)

    @transaction
    def admit_one(self, conn: Connection, args: AdmitArgs) -> Admission:
        """`admit` of one AdmitArgs."""
        return self._admit_in(conn, args)

    @transaction
    def admit_many(self, conn: Connection, batch: list[AdmitArgs]) -> list[Admission]:
        """Several admissions in one transaction (group commit), each decided in turn.

        On PostgreSQL every rate key's advisory lock is taken first, in sorted order, before
        any day row: two replicas' batches then never wait on each other in a cycle.
        """
        if self.db.dialect == "postgresql":
            for key in sorted({a.rate.key for a in batch if a.rate is not None}):
                conn.exec_driver_sql(self._q["rate_lock"], {"key": key})
        return [self._admit_in(conn, args) for args in batch]

    def _admit_in(self, conn: Connection, a: AdmitArgs) -> Admission:
        q = self._q
        counted = None
        if a.rate is not None:
            decision, counted = self._rate_check(conn, a.rate, a.now)
            if not decision.allowed:
                row = a.refusal.model_copy(update={"error_code": "rate_limited"})
                conn.exec_driver_sql(q["ledger"], self._ledger_params(row))
                return Admission(False, "rate_limited", decision.retry_after_s)
        held = a.held
        assert held is not None, "a hold to make: rate-only admissions are admit_rates"
        self._ensure_day(conn, held.day, a.cap_micros)
        # One conditional UPDATE: the row lock (PG) or the writer lock (SQLite) makes the
        # check and the increment one atomic step across every replica. Never shrunk to fit.
        day = self.db.date_param(held.day)
        result = conn.exec_driver_sql(
            q["reserve"], {"w": held.amount_micros, "cap": a.cap_micros, "day": day}
        )
        if result.rowcount != 1:
            row = a.refusal.model_copy(update={"error_code": "llm_budget_exhausted"})
            conn.exec_driver_sql(q["ledger"], self._ledger_params(row))
            return Admission(False, "llm_budget_exhausted", None)
        conn.exec_driver_sql(
            q["hold"],
            {
                "id": held.id,
                "call_id": a.call_id,
                "request_id": a.request_id,
                "day": day,
                "amount": held.amount_micros,
                "created_at": a.now,
                "expires_at": a.expires_at,
                "purpose": a.purpose,
                "has_person": a.has_person,
            },
        )
        if a.rate is not None:
            conn.exec_driver_sql(q["rate_insert"], {"key": a.rate.key, "at": a.now})
        after_commit(conn, lambda: self._days_created.add(held.day))
        return Admission(True, counted=counted)

    @transaction
    def release_expired(self, conn: Connection, now: float) -> int:
        """Release holds whose call crashed or hung past its expiry; returns how many."""
        rows = conn.execute(
            select(RESERVATIONS.c.id, RESERVATIONS.c.day, RESERVATIONS.c.amount_micros)
            .where(RESERVATIONS.c.expires_at < now)
            .limit(SWEEP_BATCH)
        ).all()
        released = 0
        for rid, day, amount in rows:
            gone = conn.execute(delete(RESERVATIONS).where(RESERVATIONS.c.id == rid))
            if gone.rowcount == 1:
                conn.execute(
                    update(BUDGET)
                    .where(BUDGET.c.day == day)
                    .values(reserved_micros=BUDGET.c.reserved_micros - amount)
                )
                released += 1
        return released

    @read_only
    def open_reservations(self, conn: Connection) -> tuple[int, int]:
        """How many holds are open and their total amount."""
        row = conn.execute(
            select(func.count(), func.coalesce(func.sum(RESERVATIONS.c.amount_micros), 0))
        ).one()
        return int(row[0]), int(row[1])

    @read_only
    def held(self, conn: Connection, day: date) -> list[HeldRow]:
        """The day's open reservations by purpose and by whether a person made the call."""
        rows = conn.execute(
            select(
                RESERVATIONS.c.purpose,
                RESERVATIONS.c.has_person,
                func.coalesce(func.sum(RESERVATIONS.c.amount_micros), 0),
            )
            .where(RESERVATIONS.c.day == day)
            .group_by(RESERVATIONS.c.purpose, RESERVATIONS.c.has_person)
        ).all()
        return [HeldRow(p, None if hp is None else bool(hp), int(amount)) for p, hp, amount in rows]
