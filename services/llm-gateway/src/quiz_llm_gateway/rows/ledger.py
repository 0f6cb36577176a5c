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

    async def settle(self, held: Held | None, row: LedgerRow) -> int:
        """Release the hold, add the real cost and write the ledger row: one transaction.

        Without a hold (a refused call, cost 0) only the ledger row is written. Idempotent:
        when the row of (call_id, attempt) is already there, nothing changes. Returns the
        settle's day's spent + reserved micro-USD just after it (`settle_many`).
        """
        return (await self.settle_many([(held, row)]))[0]

    async def settle_many(self, entries: list[tuple[Held | None, LedgerRow]]) -> list[int]:
        """Several settles in one transaction (group commit), in day order so that two
        writers' batches never wait on each other's day rows in opposite orders.

        Returns, for each entry in the order given, its day's spent + reserved micro-USD just
        after its settle (issue 31 item 6: the reply's remaining_usd without another read) —
        a snapshot under the day row's lock: every hold and settle committed before it, on any
        replica, and the batch's earlier settles; 0 for a day without a row.

        On PostgreSQL one round trip (`_settle_many_pg`, issue 32), the batch's lease rows
        locked first, in id order, before any day row: a per-call settle earlier in the batch
        would otherwise take the day row before a slice's lease row, the opposite of a lease, a
        return or an expiry of that slice (a deadlock).
        """
        if self.db.dialect == "postgresql":
            return await self._settle_many_pg(entries)
        return await self._settle_many_lite(entries)

    async def _settle_many_pg(self, entries: list[tuple[Held | None, LedgerRow]]) -> list[int]:
        """Every settle of the batch as one statement (`settle_sliced`: data-modifying CTEs in
        the order of every other writer, lease row then day row; `settle_held`), sent in one
        pipeline after the days' rows (when not known to exist) and, for a batch of several,
        the lease rows' locks. A batch of one is one statement, its own transaction. Committed
        with the server's synchronous_commit (on): the ledger row is on disk before the
        caller's reply — never lowered for a spend record."""
        q = self._q
        order = sorted(range(len(entries)), key=lambda i: (entries[i][0] or entries[i][1]).day)
        ordered = [entries[i] for i in order]
        days = sorted({(h or r).day for h, r in ordered} - self._days_created)
        statements: list[tuple[str, dict[str, Any]]] = [
            (q["ensure_day"], {"day": day, "cap": 0}) for day in days
        ]
        leases = sorted({h.lease_id for h, _ in entries if h is not None and h.lease_id})
        if len(entries) > 1:
            statements += [(q["lease_lock"] + " FOR UPDATE", {"id": i}) for i in leases]
        for held, row in ordered:
            params = self._ledger_params(row)
            if held is not None and held.lease_id is not None and row.cost_micros:
                params.update(
                    lease_id=held.lease_id,
                    lease_cost=min(row.cost_micros, held.amount_micros),
                    hold_day=held.day,
                )
                statements.append((q["settle_sliced"], params))
            else:
                own = held is not None and held.lease_id is None
                params.update(
                    hold_id=held.id if own and held is not None else None,
                    hold_day=(held or row).day,
                )
                statements.append((q["settle_held"], params))
        sent = await self.db.pipeline(statements)
        self._days_created.update(days)
        # The settles are the last len(entries) statements, in `order`: each answers its used.
        used = [0] * len(entries)
        for i, answer in zip(order, sent[len(sent) - len(entries) :], strict=True):
            used[i] = int(answer.rows[0][0])
        return used

    @transaction
    def _settle_many_lite(
        self, conn: Connection, entries: list[tuple[Held | None, LedgerRow]]
    ) -> list[int]:
        """SQLite: the settles in day order (its one writer lock makes any order safe; the
        order is PostgreSQL's, kept the same on both)."""
        order = sorted(range(len(entries)), key=lambda i: (entries[i][0] or entries[i][1]).day)
        used = [0] * len(entries)
        for i in order:
            used[i] = self._settle_in(conn, *entries[i])
        return used

    def _settle_in(self, conn: Connection, held: Held | None, row: LedgerRow) -> int:
        """One settle; returns its day's spent + reserved just after it (the `settle`
        statement's RETURNING; read in the writer's transaction when no day row changed)."""
        q = self._q
        day = held.day if held is not None else row.day
        if conn.exec_driver_sql(q["ledger_once"], self._ledger_params(row)).rowcount != 1:
            return self._day_used(conn, day)
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
        if not (released or row.cost_micros):
            return self._day_used(conn, day)
        self._ensure_day(conn, day, 0)
        params = {"released": released, "cost": row.cost_micros, "day": self.db.date_param(day)}
        return int(conn.exec_driver_sql(q["settle"], params).scalar_one())

    def _day_used(self, conn: Connection, day: date) -> int:
        """SQLite, in the settle's transaction (in process, no round trip): the day's spent +
        reserved, 0 before its first call."""
        params = {"day": self.db.date_param(day)}
        found = conn.exec_driver_sql(self._q["day_row"], params).first()
        return int(found[0]) + int(found[1]) if found is not None else 0

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
    def quota(
        self, conn: Connection, day: date, rate_key: str | None, since: float
    ) -> tuple[int, int]:
        """The quota read on its own, in one plain statement: the day's spent + reserved
        micro-USD (0 before its first call), and the calls of `rate_key` counted in its window
        (at > since; 0 without a key). No call's path reads it (issue 31 point 6: a reply's
        quota comes from its settle and its rate check); bench/llm_gateway_quota.py prices it."""
        params = {"day": self.db.date_param(day), "key": rate_key or "", "since": since}
        used, counted = conn.exec_driver_sql(self._q["quota"], params).one()
        return int(used or 0), int(counted) if rate_key is not None else 0

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
