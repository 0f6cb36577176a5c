"""Every SQL statement of the gateway: budget holds and settlement, ledger, rate log, usage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import case, delete, func, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from quiz_llm_gateway.domain.ratelimit import RateDecision, decide
from quiz_llm_gateway.models import BudgetDay, LedgerEntry, RateEvent, Reservation

BUDGET = BudgetDay.__table__
RESERVATIONS = Reservation.__table__
LEDGER = LedgerEntry.__table__
RATE = RateEvent.__table__

SWEEP_BATCH = 200


@dataclass(frozen=True, slots=True)
class Held:
    """A reservation this replica holds: what settle needs to release it."""

    id: str
    day: date
    amount_micros: int


@dataclass(frozen=True, slots=True)
class RateKey:
    """A (person, purpose) sliding window: at most `limit` calls per `window_s`."""

    key: str
    limit: int
    window_s: float


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a call was admitted; if not, the error code and when to retry."""

    admitted: bool
    refused: str | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class DayTotals:
    """The budget row of a day."""

    cap_micros: int
    reserved_micros: int
    spent_micros: int


@dataclass(frozen=True, slots=True)
class SpendRow:
    """Ledger sums of one (purpose, has person) slice."""

    purpose: str
    has_person: bool
    calls: int
    input_tokens: int
    output_tokens: int
    cost_micros: int


class Repository:
    """The gateway's database, one short transaction per operation."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._days_created: set[date] = set()

    async def _ensure_day(self, conn: AsyncConnection, day: date, cap_micros: int) -> None:
        """Create the day's budget row; a concurrent creator wins harmlessly.

        The day is remembered only once a transaction that saw the row has committed: an
        uncommitted insert is invisible to another transaction's UPDATE.
        """
        if day in self._days_created:
            return
        ins = postgresql.insert(BUDGET) if self.dialect == "postgresql" else sqlite.insert(BUDGET)
        await conn.execute(
            ins.values(
                day=day, cap_micros=cap_micros, reserved_micros=0, spent_micros=0
            ).on_conflict_do_nothing(index_elements=["day"])
        )

    async def admit(
        self,
        *,
        held: Held,
        call_id: str,
        request_id: str | None,
        cap_micros: int,
        now: float,
        expires_at: float,
        rate: RateKey | None,
        refusal: dict[str, Any],
    ) -> Admission:
        """Rate check, then hold the worst case if it fits under the cap: one transaction.

        A refusal writes its ledger row (`refusal` with the error code) in the same transaction.
        """
        async with self.engine.begin() as conn:
            if rate is not None:
                decision = await self._rate_check(conn, rate, now)
                if not decision.allowed:
                    await conn.execute(
                        insert(LEDGER).values({**refusal, "error_code": "rate_limited"})
                    )
                    return Admission(False, "rate_limited", decision.retry_after_s)
            await self._ensure_day(conn, held.day, cap_micros)
            # One conditional UPDATE: the row lock (PG) or the writer lock (SQLite) makes the
            # check and the increment one atomic step across every replica. Never shrunk to fit.
            result = await conn.execute(
                update(BUDGET)
                .where(
                    BUDGET.c.day == held.day,
                    BUDGET.c.spent_micros + BUDGET.c.reserved_micros + held.amount_micros
                    <= cap_micros,
                )
                .values(
                    reserved_micros=BUDGET.c.reserved_micros + held.amount_micros,
                    cap_micros=cap_micros,
                )
            )
            if result.rowcount != 1:
                await conn.execute(
                    insert(LEDGER).values({**refusal, "error_code": "llm_budget_exhausted"})
                )
                return Admission(False, "llm_budget_exhausted", None)
            await conn.execute(
                insert(RESERVATIONS).values(
                    id=held.id,
                    call_id=call_id,
                    request_id=request_id,
                    day=held.day,
                    amount_micros=held.amount_micros,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
            if rate is not None:
                await conn.execute(insert(RATE).values(key=rate.key, at=now))
        self._days_created.add(held.day)
        return Admission(True)

    async def _rate_check(self, conn: AsyncConnection, rate: RateKey, now: float) -> RateDecision:
        """Sliding log: fewer than `limit` events in (now - window, now] admits one more."""
        if self.dialect == "postgresql":
            # Serialises the count-then-insert of one key across replicas.
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": rate.key}
            )
        await conn.execute(
            delete(RATE).where(RATE.c.key == rate.key, RATE.c.at <= now - rate.window_s)
        )
        times = (await conn.execute(select(RATE.c.at).where(RATE.c.key == rate.key))).scalars()
        return decide(list(times), rate.limit, now, rate.window_s)

    async def settle(self, held: Held | None, entry: dict[str, Any]) -> None:
        """Release the hold, add the real cost and write the ledger row: one transaction."""
        async with self.engine.begin() as conn:
            cost = int(entry["cost_micros"])
            released = 0
            if held is not None:
                gone = await conn.execute(delete(RESERVATIONS).where(RESERVATIONS.c.id == held.id))
                # A hold the sweep already expired was released there: never release twice.
                released = held.amount_micros if gone.rowcount == 1 else 0
            if released or cost:
                day = held.day if held is not None else entry["day"]
                await self._ensure_day(conn, day, 0)
                await conn.execute(
                    update(BUDGET)
                    .where(BUDGET.c.day == day)
                    .values(
                        reserved_micros=BUDGET.c.reserved_micros - released,
                        spent_micros=BUDGET.c.spent_micros + cost,
                    )
                )
            await conn.execute(insert(LEDGER).values(**entry))

    async def record(self, entry: dict[str, Any]) -> None:
        """A ledger row without a hold: a refused call (cost 0)."""
        async with self.engine.begin() as conn:
            await conn.execute(insert(LEDGER).values(**entry))

    async def release_expired(self, now: float) -> int:
        """Release holds whose call crashed or hung past its expiry; returns how many."""
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    select(RESERVATIONS.c.id, RESERVATIONS.c.day, RESERVATIONS.c.amount_micros)
                    .where(RESERVATIONS.c.expires_at < now)
                    .limit(SWEEP_BATCH)
                )
            ).all()
            released = 0
            for rid, day, amount in rows:
                gone = await conn.execute(delete(RESERVATIONS).where(RESERVATIONS.c.id == rid))
                if gone.rowcount == 1:
                    await conn.execute(
                        update(BUDGET)
                        .where(BUDGET.c.day == day)
                        .values(reserved_micros=BUDGET.c.reserved_micros - amount)
                    )
                    released += 1
            return released

    async def day_totals(self, day: date) -> DayTotals | None:
        """The day's cap, open reservations and spend; None before its first call."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(
                        BUDGET.c.cap_micros, BUDGET.c.reserved_micros, BUDGET.c.spent_micros
                    ).where(BUDGET.c.day == day)
                )
            ).first()
            await conn.rollback()
        return DayTotals(int(row[0]), int(row[1]), int(row[2])) if row else None

    async def open_reservations(self) -> tuple[int, int]:
        """How many holds are open and their total amount."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(func.count(), func.coalesce(func.sum(RESERVATIONS.c.amount_micros), 0))
                )
            ).one()
            await conn.rollback()
        return int(row[0]), int(row[1])

    async def spend(self, day: date, billed_to: str | None = None) -> list[SpendRow]:
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
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            await conn.rollback()
        return [
            SpendRow(str(p), bool(int(hp)), int(c), int(i), int(o), int(cost))
            for p, hp, c, i, o, cost in rows
        ]

    async def ledger_rows(self, **where: Any) -> list[dict[str, Any]]:
        """Ledger rows matching column equalities (tests and the admin view)."""
        query = select(LEDGER).order_by(LEDGER.c.id)
        for column, value in where.items():
            query = query.where(LEDGER.c[column] == value)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
            await conn.rollback()
        return [dict(r) for r in rows]
