"""The books (`llm_ledger`, the day's spend): settles (hold released, real cost, ledger row, in
one transaction), the database's id, and the day's totals and spend read back."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import Connection, case, func, select

from quiz_llm_gateway.rows.base import (
    BUDGET,
    LEDGER,
    DayTotals,
    Held,
    LedgerRow,
    SpendRow,
    Tables,
)
from quiz_servicekit.db import read_only, transaction


class LedgerRows(Tables):
    """Settles and the ledger read back."""

    @transaction
    def settle(self, conn: Connection, held: Held | None, row: LedgerRow) -> None:
        """Release the hold, add the real cost and write the ledger row: one transaction.

        Without a hold (a refused call, cost 0) only the ledger row is written. Idempotent:
        when the row of (call_id, attempt) is already there, nothing changes.
        """
        self._settle_in(conn, held, row)

    @transaction
    def settle_many(self, conn: Connection, entries: list[tuple[Held | None, LedgerRow]]) -> None:
        """Several settles in one transaction (group commit), in day order so that two
        writers' batches never wait on each other's day rows in opposite orders.

        On PostgreSQL the batch's lease rows are locked first, in id order, before any day row:
        a per-call settle earlier in the batch would otherwise take the day row before a slice's
        lease row, the opposite of a lease, a return or an expiry of that slice (a deadlock).
        """
        leases = sorted({h.lease_id for h, _ in entries if h is not None and h.lease_id})
        if leases and self.db.dialect == "postgresql":
            for lease_id in leases:
                conn.exec_driver_sql(self._q["lease_lock"] + " FOR UPDATE", {"id": lease_id})
        for held, row in sorted(entries, key=lambda e: (e[0] or e[1]).day):
            self._settle_in(conn, held, row)

    def _settle_in(self, conn: Connection, held: Held | None, row: LedgerRow) -> None:
        q = self._q
        if (
            held is not None
            and held.lease_id is not None
            and row.cost_micros
            and self.db.dialect == "postgresql"
        ):
            # The same three steps as below in one round trip (issue 24): PostgreSQL's
            # data-modifying CTEs, in the order of every other writer (lease row, day row).
            self._ensure_day(conn, held.day, 0)
            params = self._ledger_params(row)
            params.update(
                lease_id=held.lease_id,
                lease_cost=min(row.cost_micros, held.amount_micros),
                hold_day=held.day,
            )
            conn.exec_driver_sql(q["settle_sliced"], params)
            return
        if conn.exec_driver_sql(q["ledger_once"], self._ledger_params(row)).rowcount != 1:
            return
        released = 0
        if held is not None and held.lease_id is not None:
            # The cost leaves the slice for the spend; the rest of the hold stays in the slice
            # (free for the replica's next call). A slice already returned or expired gave its
            # amount back then: never release twice.
            cost = min(row.cost_micros, held.amount_micros)
            params = {"id": held.lease_id, "amount": cost}
            gone = conn.exec_driver_sql(q["lease_spend"], params) if cost else None
            released = cost if gone is not None and gone.rowcount == 1 else 0
        elif held is not None:
            gone = conn.exec_driver_sql(q["unhold"], {"id": held.id})
            # A hold the sweep already expired was released there: never release twice.
            released = held.amount_micros if gone.rowcount == 1 else 0
        if released or row.cost_micros:
            day = held.day if held is not None else row.day
            self._ensure_day(conn, day, 0)
            conn.exec_driver_sql(
                q["settle"],
                {"released": released, "cost": row.cost_micros, "day": self.db.date_param(day)},
            )

    @read_only
    def database_id(self, conn: Connection) -> str:
        """The database's own id (migration 0005): the subject of its journal entries."""
        return str(conn.exec_driver_sql("SELECT id FROM gateway_identity").scalar_one())

    @read_only
    def day_totals(self, conn: Connection, day: date) -> DayTotals | None:
        """The day's cap, open reservations and spend; None before its first call."""
        row = conn.execute(
            select(BUDGET.c.cap_micros, BUDGET.c.reserved_micros, BUDGET.c.spent_micros).where(
                BUDGET.c.day == day
            )
        ).first()
        return DayTotals(int(row[0]), int(row[1]), int(row[2])) if row else None

    @read_only
    def spend(self, conn: Connection, day: date, billed_to: str | None = None) -> list[SpendRow]:
        """The day's ledger by purpose and by whether a person made the call."""
        has_person = case((LEDGER.c.person.is_(None), 0), else_=1).label("has_person")
        calls = func.count(func.distinct(case((LEDGER.c.attempt >= 1, LEDGER.c.call_id))))
        query = (
            select(
                LEDGER.c.purpose,
                has_person,
                calls,
                func.coalesce(func.sum(LEDGER.c.input_tokens), 0),
                func.coalesce(func.sum(LEDGER.c.output_tokens), 0),
                func.coalesce(func.sum(LEDGER.c.cost_micros), 0),
            )
            .where(LEDGER.c.day == day)
            .group_by(LEDGER.c.purpose, has_person)
        )
        if billed_to is not None:
            query = query.where(LEDGER.c.billed_to == billed_to)
        rows = conn.execute(query).all()
        return [
            SpendRow(str(p), bool(int(hp)), int(c), int(i), int(o), int(cost))
            for p, hp, c, i, o, cost in rows
        ]

    @read_only
    def ledger_rows(self, conn: Connection, **where: Any) -> list[dict[str, Any]]:
        """Ledger rows matching column equalities (tests and the admin view)."""
        query = select(LEDGER).order_by(LEDGER.c.id)
        for column, value in where.items():
            query = query.where(LEDGER.c[column] == value)
        return [dict(r) for r in conn.execute(query).mappings().all()]
