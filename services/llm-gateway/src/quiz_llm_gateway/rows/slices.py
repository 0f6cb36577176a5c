"""The replicas' slices of the day's cap (`cap_leases`, issue 24)."""

from __future__ import annotations

from datetime import date

from sqlalchemy import Connection, select

from quiz_llm_gateway.domain.slices import SliceSizing
from quiz_llm_gateway.rows.base import (
    LEASES,
    SWEEP_BATCH,
    Tables,
)
from quiz_servicekit.db import after_commit, read_only, transaction


class CapSliceRows(Tables):
    """The replicas' slices of the day's cap (`cap_leases`, migration 0006): leased, renewed,
    returned, and expired ones given back (docs/llm-gateway.md, "Slices of the cap")."""

    @transaction
    def lease_slice(
        self,
        conn: Connection,
        *,
        lease_id: str,
        exists: bool,
        day: date,
        cap_micros: int,
        worst_micros: int,
        sizing: SliceSizing,
        now: float,
        expires_at: float,
    ) -> int | None:
        """Reserve a slice of `day`'s remaining cap for lease `lease_id` (grown when `exists`,
        else created): `sizing.size(cap - spent - reserved, worst_micros)`, never more than
        remains. Returns the micro-USD reserved (0: too little left, admit the call on its
        own), or None when the lease row is gone (expired and returned by a sweep).

        The day row is read under its lock (PostgreSQL `FOR UPDATE`; SQLite's writer lock) and
        the reservation is still the conditional UPDATE of a hold: the invariant
        `spent + reserved <= cap` holds whatever runs concurrently.
        """
        q = self._q
        lock = " FOR UPDATE" if self.db.dialect == "postgresql" else ""
        # The lease row first, then the day row: the order of every settle, return and expiry
        # (a settle batch of this replica runs beside this transaction; the opposite order
        # would be a deadlock).
        if (
            exists
            and conn.exec_driver_sql(q["lease_lock"] + lock, {"id": lease_id}).first() is None
        ):
            return None
        self._ensure_day(conn, day, cap_micros)
        d = self.db.date_param(day)
        row = conn.exec_driver_sql(q["day_row"] + lock, {"day": d}).first()
        if row is None:
            return 0
        after_commit(conn, lambda: self._days_created.add(day))
        size = sizing.size(cap_micros - int(row[0]) - int(row[1]), worst_micros)
        if size <= 0:
            return 0
        params = {"id": lease_id, "amount": size, "expires_at": expires_at}
        if exists:
            if conn.exec_driver_sql(q["lease_grow"], params).rowcount != 1:
                return None
        else:
            conn.exec_driver_sql(q["lease_insert"], {**params, "day": d, "now": now})
        reserved = conn.exec_driver_sql(q["reserve"], {"w": size, "cap": cap_micros, "day": d})
        if reserved.rowcount != 1:  # cannot happen under the row lock; roll the lease back
            raise RuntimeError("the day row changed under its lock")
        return size

    @transaction
    def renew_lease(self, conn: Connection, lease_id: str, expires_at: float) -> bool:
        """Extend lease `lease_id` to `expires_at`; False when it is gone (a sweep returned it)."""
        params = {"id": lease_id, "expires_at": expires_at}
        if conn.exec_driver_sql(self._q["lease_renew"], params).rowcount == 1:
            return True
        return conn.execute(select(LEASES.c.id).where(LEASES.c.id == lease_id)).first() is not None

    @transaction
    def return_lease(
        self, conn: Connection, lease_id: str, day: date, amount_micros: int, *, drop: bool
    ) -> int:
        """Give back `amount_micros` of lease `lease_id` (its free part), or with `drop` the
        whole row (no hold in flight: what the row holds, which a journaled settle may not have
        taken off yet — its replay then finds the lease gone and only adds the spend).
        Returns the micro-USD released from the day's reserved."""
        q = self._q
        if drop:
            row = conn.exec_driver_sql(q["lease_drop"], {"id": lease_id}).first()
            if row is None:
                return 0
            amount_micros = int(row[1])
        elif (
            amount_micros <= 0
            or (
                conn.exec_driver_sql(q["lease_spend"], {"id": lease_id, "amount": amount_micros})
            ).rowcount
            != 1
        ):
            return 0
        if amount_micros:
            conn.exec_driver_sql(
                q["unreserve"], {"amount": amount_micros, "day": self.db.date_param(day)}
            )
        return amount_micros

    @transaction
    def release_expired_leases(self, conn: Connection, now: float) -> int:
        """Return slices whose replica stopped renewing them (killed, partitioned): their whole
        amount goes back to the day. Returns how many."""
        ids = conn.execute(
            select(LEASES.c.id).where(LEASES.c.expires_at < now).limit(SWEEP_BATCH)
        ).all()
        released = 0
        for (lease_id,) in ids:
            row = conn.exec_driver_sql(self._q["lease_expire"], {"id": lease_id, "now": now})
            gone = row.first()
            if gone is None:
                continue
            amount = int(gone[1])
            if amount:
                day = gone[0] if isinstance(gone[0], date) else date.fromisoformat(str(gone[0]))
                conn.exec_driver_sql(
                    self._q["unreserve"], {"amount": amount, "day": self.db.date_param(day)}
                )
            released += 1
        return released

    @read_only
    def leases(self, conn: Connection) -> list[tuple[str, int, float]]:
        """Every lease row: (id, amount micro-USD, expires_at) (tests and the admin view)."""
        rows = conn.execute(
            select(LEASES.c.id, LEASES.c.amount_micros, LEASES.c.expires_at).order_by(LEASES.c.id)
        ).all()
        return [(str(i), int(a), float(e)) for i, a, e in rows]
