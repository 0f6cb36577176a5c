"""Every SQL statement of the gateway: budget holds and settlement, ledger, rate log, usage."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Connection, Table, case, delete, func, select, update
from sqlalchemy import exc as sa_exc

from quiz_llm_gateway.domain.money import check_amounts
from quiz_llm_gateway.domain.ratelimit import RateDecision, decide
from quiz_llm_gateway.domain.slices import SliceSizing
from quiz_llm_gateway.rows.tables import BudgetDay, CapLease, LedgerEntry, RateEvent, Reservation
from quiz_servicekit.db import Database, after_commit, read_only, transaction

# The Core tables behind the SQLModel classes (SQLModel declares __table__ only at runtime).
BUDGET: Table = BudgetDay.__table__  # type: ignore[attr-defined]
RESERVATIONS: Table = Reservation.__table__  # type: ignore[attr-defined]
LEDGER: Table = LedgerEntry.__table__  # type: ignore[attr-defined]
RATE: Table = RateEvent.__table__  # type: ignore[attr-defined]
LEASES: Table = CapLease.__table__  # type: ignore[attr-defined]

SWEEP_BATCH = 200
# What a database that cannot be reached raises (refused, reset, locked, pool exhausted): a
# fault that passes, answered `unavailable` with a retry_after_s, never `internal`.
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
)


def is_outage(error: BaseException) -> bool:
    """Whether `error` is the database being unreachable (not a bug in a statement)."""
    return isinstance(error, OUTAGE_ERRORS)


LEDGER_COLUMNS = [c.name for c in LEDGER.columns if c.name != "id"]

# Column names come from our own table model, never from input.
_LEDGER_INSERT = "INSERT INTO llm_ledger ({}) VALUES ({})".format(  # noqa: S608
    ", ".join(LEDGER_COLUMNS), ", ".join(":" + c for c in LEDGER_COLUMNS)
)

# The statements of every call, as plain SQL valid on SQLite and PostgreSQL alike.
HOT_SQL: dict[str, str] = {
    "ensure_day": (
        "INSERT INTO budget_days (day, cap_micros, reserved_micros, spent_micros) "
        "VALUES (:day, :cap, 0, 0) ON CONFLICT (day) DO NOTHING"
    ),
    "reserve": (
        "UPDATE budget_days SET reserved_micros = reserved_micros + :w, cap_micros = :cap "
        "WHERE day = :day AND spent_micros + reserved_micros + :w <= :cap"
    ),
    "hold": (
        "INSERT INTO reservations "
        "(id, call_id, request_id, day, amount_micros, created_at, expires_at, purpose, "
        "has_person) VALUES (:id, :call_id, :request_id, :day, :amount, :created_at, "
        ":expires_at, :purpose, :has_person)"
    ),
    "unhold": "DELETE FROM reservations WHERE id = :id",
    "settle": (
        "UPDATE budget_days SET reserved_micros = reserved_micros - :released, "
        "spent_micros = spent_micros + :cost WHERE day = :day"
    ),
    "ledger": _LEDGER_INSERT,
    # PostgreSQL only: the settle of a call held in a slice as one statement (_settle_in).
    "settle_sliced": (
        "WITH ins AS (" + _LEDGER_INSERT + " ON CONFLICT (call_id, attempt) DO NOTHING "  # noqa: S608
        "RETURNING 1), "
        "lease AS (UPDATE cap_leases SET amount_micros = amount_micros - :lease_cost "
        "WHERE id = :lease_id AND amount_micros >= :lease_cost AND EXISTS (SELECT 1 FROM ins) "
        "RETURNING 1) "
        "UPDATE budget_days SET reserved_micros = reserved_micros - "
        "CASE WHEN EXISTS (SELECT 1 FROM lease) THEN :lease_cost ELSE 0 END, "
        "spent_micros = spent_micros + :cost_micros "
        "WHERE day = :hold_day AND EXISTS (SELECT 1 FROM ins)"
    ),
    # A settle may be written twice (a replayed journal entry, a commit whose answer was
    # lost): the second is a no-op, keyed by (call_id, attempt).
    "ledger_once": _LEDGER_INSERT + " ON CONFLICT (call_id, attempt) DO NOTHING",
    "rate_lock": "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))",
    # Events that left the window are not read (the sweep deletes them): one statement less
    # per call than pruning the key first.
    "rate_times": "SELECT at FROM rate_events WHERE key = :key AND at > :since",
    "rate_insert": "INSERT INTO rate_events (key, at) VALUES (:key, :at)",
    # The count and the insert in one statement (under the key's lock): a call admitted by its
    # rate alone is one round trip.
    "rate_admit": (
        "INSERT INTO rate_events (key, at) SELECT CAST(:key AS VARCHAR(300)), "
        "CAST(:at AS DOUBLE PRECISION) WHERE "
        "(SELECT COUNT(*) FROM rate_events WHERE key = :key AND at > :since) < :limit"
    ),
    # Issue 24: the rate-only transaction does not wait for its WAL flush (admit_rates), set
    # in the round trip of the first key's lock.
    "async_commit": "SELECT set_config('synchronous_commit', 'off', true)",
    "rate_lock_async": (
        "SELECT set_config('synchronous_commit', 'off', true), "
        "pg_advisory_xact_lock(hashtextextended(:key, 0))"
    ),
    "idem_expire": "DELETE FROM idempotency_keys WHERE key = :key AND expires_at < :now",
    "idem_claim": (
        "INSERT INTO idempotency_keys (key, digest, call_id, reply, created_at, expires_at) "
        "VALUES (:key, :digest, :call_id, NULL, :now, :until) ON CONFLICT (key) DO NOTHING"
    ),
    "idem_get": "SELECT digest, call_id, reply FROM idempotency_keys WHERE key = :key",
    "idem_done": (
        "UPDATE idempotency_keys SET reply = :reply, expires_at = :until "
        "WHERE key = :key AND call_id = :call_id"
    ),
    "idem_put": (
        "INSERT INTO idempotency_keys (key, digest, call_id, reply, created_at, expires_at) "
        "VALUES (:key, :digest, :call_id, :reply, :now, :until) ON CONFLICT (key) DO NOTHING"
    ),
    "idem_forget": "DELETE FROM idempotency_keys WHERE key = :key AND call_id = :call_id",
    "idem_prune": "DELETE FROM idempotency_keys WHERE expires_at < :now",
    # Slices of the cap (issue 24): a lease row's amount is part of the day's reserved_micros.
    "day_row": "SELECT spent_micros, reserved_micros FROM budget_days WHERE day = :day",
    "lease_lock": "SELECT id FROM cap_leases WHERE id = :id",
    "lease_insert": (
        "INSERT INTO cap_leases (id, day, amount_micros, created_at, expires_at) "
        "VALUES (:id, :day, :amount, :now, :expires_at)"
    ),
    "lease_grow": (
        "UPDATE cap_leases SET amount_micros = amount_micros + :amount, "
        "expires_at = CASE WHEN expires_at < :expires_at THEN :expires_at ELSE expires_at END "
        "WHERE id = :id"
    ),
    "lease_renew": (
        "UPDATE cap_leases SET expires_at = :expires_at WHERE id = :id AND expires_at < :expires_at"
    ),
    "lease_spend": (
        "UPDATE cap_leases SET amount_micros = amount_micros - :amount "
        "WHERE id = :id AND amount_micros >= :amount"
    ),
    "lease_drop": "DELETE FROM cap_leases WHERE id = :id RETURNING day, amount_micros",
    "lease_expire": (
        "DELETE FROM cap_leases WHERE id = :id AND expires_at < :now RETURNING day, amount_micros"
    ),
    "unreserve": (
        "UPDATE budget_days SET reserved_micros = reserved_micros - :amount WHERE day = :day"
    ),
}


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One row of `llm_ledger`: a provider attempt or a refusal. Never any prompt text."""

    at: datetime
    day: date
    call_id: str
    attempt: int  # 0 for a refusal, else 1 or 2 (the second after an unreadable reply)
    purpose: str
    person: str | None
    billed_to: str | None
    model: str
    effort: str
    outcome: str  # ok, unreadable, provider_error, refused
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    reserved_micros: int = 0
    error_code: str | None = None
    provider_requests: int = 0
    latency_ms: int = 0
    request_id: str | None = None
    trace_id: str | None = None

    def __post_init__(self) -> None:
        # Never a negative cost or count, whoever builds the row (issue 29, domain.money).
        check_amounts(
            "ledger row",
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_micros=self.cost_micros,
            reserved_micros=self.reserved_micros,
        )


@dataclass(frozen=True, slots=True)
class Held:
    """A hold this replica made: what settle needs to release it.

    `lease_id` None: a `reservations` row of its own (admitted in its own transaction). Else a
    hold against this replica's slice `lease_id` (in memory): its settle moves the cost from
    the lease row to the day's spend.
    """

    id: str
    day: date
    amount_micros: int
    lease_id: str | None = None

    def __post_init__(self) -> None:
        check_amounts("hold", amount_micros=self.amount_micros)


@dataclass(frozen=True, slots=True)
class RateKey:
    """A (person, purpose) sliding window: at most `limit` calls per `window_s`."""

    key: str
    limit: int
    window_s: float


@dataclass(frozen=True, slots=True)
class AdmitArgs:
    """One admission: the hold to make, the call, the rate key, the refusal row to write.

    `held` None: only the rate check (the call's hold was taken from this replica's slice).
    """

    held: Held | None
    call_id: str
    request_id: str | None
    purpose: str
    has_person: bool
    cap_micros: int
    now: float
    expires_at: float
    rate: RateKey | None
    refusal: LedgerRow


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a call was admitted; if not, the error code and when to retry."""

    admitted: bool
    refused: str | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """A request_id's row: ours (`owner`), or another call's with its digest and reply."""

    owner: bool
    digest: str | None = None
    call_id: str | None = None
    reply: str | None = None


@dataclass(frozen=True, slots=True)
class DayTotals:
    """The budget row of a day."""

    cap_micros: int
    reserved_micros: int
    spent_micros: int


@dataclass(frozen=True, slots=True)
class HeldRow:
    """Open reservations of one (purpose, has person) slice of a day."""

    purpose: str | None
    has_person: bool | None
    amount_micros: int


@dataclass(frozen=True, slots=True)
class SpendRow:
    """Ledger sums of one (purpose, has person) slice."""

    purpose: str
    has_person: bool
    calls: int
    input_tokens: int
    output_tokens: int
    cost_micros: int


class _Tables:
    """What every group of the gateway's statements shares: the database, the hot statements in
    the driver's paramstyle, and the days whose budget row is known to exist."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._days_created: set[date] = set()
        self._q = {name: db.sql(sql) for name, sql in HOT_SQL.items()}

    def _ledger_params(self, row: LedgerRow) -> dict[str, Any]:
        params = {column: getattr(row, column) for column in LEDGER_COLUMNS}
        params["day"] = self.db.date_param(row.day)
        if self.db.dialect != "postgresql":
            # The text form SQLAlchemy's SQLite DateTime reads back.
            params["at"] = row.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        return params

    def _ensure_day(self, conn: Connection, day: date, cap_micros: int) -> None:
        """Create the day's budget row; a concurrent creator wins harmlessly.

        The day is remembered only once a transaction that saw the row has committed: an
        uncommitted insert is invisible to another transaction's UPDATE.
        """
        if day in self._days_created:
            return
        conn.exec_driver_sql(
            self._q["ensure_day"], {"day": self.db.date_param(day), "cap": cap_micros}
        )


class CapSliceRows(_Tables):
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


class RequestIdRows(_Tables):
    """The request ids (`idempotency_keys`): a call's claim, the reply kept for its repeats, the
    release after a failure, and the pruning of expired ones."""

    @transaction
    def claim_request(
        self, conn: Connection, key: str, digest: str, call_id: str, now: float, until: float
    ) -> Claim:
        """Take `key` for `call_id` until `until`, unless a live row has it (returned)."""
        q = self._q
        conn.exec_driver_sql(q["idem_expire"], {"key": key, "now": now})
        params = {"key": key, "digest": digest, "call_id": call_id, "now": now, "until": until}
        if conn.exec_driver_sql(q["idem_claim"], params).rowcount == 1:
            return Claim(True)
        row = conn.exec_driver_sql(q["idem_get"], {"key": key}).first()
        if row is None:  # released between our insert and read: the caller claims again
            return Claim(False)
        return Claim(False, str(row[0]), str(row[1]), row[2])

    @read_only
    def request_row(self, conn: Connection, key: str) -> Claim | None:
        """The current row of `key`, if any."""
        row = conn.exec_driver_sql(self._q["idem_get"], {"key": key}).first()
        return Claim(False, str(row[0]), str(row[1]), row[2]) if row is not None else None

    @transaction
    def finish_request(
        self,
        conn: Connection,
        key: str,
        digest: str,
        call_id: str,
        reply: str,
        until: float,
        now: float,
    ) -> None:
        """Keep `call_id`'s reply for `key` until `until`.

        Its claim row is there (the usual case), or was pruned meanwhile (a reply replayed from
        the journal after a long database outage): then the row is made again with the reply,
        unless another call holds the key now (that call answers it).
        """
        params = {"key": key, "call_id": call_id, "reply": reply, "until": until}
        if conn.exec_driver_sql(self._q["idem_done"], params).rowcount == 1 or until <= now:
            return
        conn.exec_driver_sql(self._q["idem_put"], {**params, "digest": digest, "now": now})

    @transaction
    def forget_request(self, conn: Connection, key: str, call_id: str) -> None:
        """Release `key` after `call_id` failed: the request may be asked again."""
        conn.exec_driver_sql(self._q["idem_forget"], {"key": key, "call_id": call_id})

    @transaction
    def prune_requests(self, conn: Connection, now: float) -> int:
        """Forget expired idempotency keys (and the replies they kept)."""
        return conn.exec_driver_sql(self._q["idem_prune"], {"now": now}).rowcount


class Repository(CapSliceRows, RequestIdRows):
    """The gateway's database: one short transaction per operation, each run whole in a thread.

    On servicekit's Database (a sync engine and a bounded thread pool; docs/llm-gateway.md says
    why not the async engine). The hot path runs plain driver SQL (`exec_driver_sql`): five
    times cheaper than compiled Core. The budget days, holds, rates and the ledger are here;
    the slices of the cap and the request ids are the statements of its two parents.
    """

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
        if a.rate is not None:
            decision = self._rate_check(conn, a.rate, a.now)
            if not decision.allowed:
                row = replace(a.refusal, error_code="rate_limited")
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
            row = replace(a.refusal, error_code="llm_budget_exhausted")
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
        return Admission(True)

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
        row = replace(a.refusal, error_code="rate_limited")
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

    @transaction
    def prune_rate_events(self, conn: Connection, before: float) -> int:
        """Forget rate events that left every window (keys not seen again are never pruned)."""
        return conn.execute(delete(RATE).where(RATE.c.at <= before)).rowcount

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
