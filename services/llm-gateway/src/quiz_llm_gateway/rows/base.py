"""What every group of the gateway's rows shares: the tables, the statements of every call,
the row shapes, the outage test, and `Tables` (the database, the statements in its paramstyle,
the days whose budget row is known to exist), the base of each group in this package."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date
from typing import Any

from pydantic import ConfigDict
from sqlalchemy import Connection, Table
from sqlalchemy import exc as sa_exc

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm_journal import JournalLedgerRow
from quiz_llm_gateway.domain.money import check_amounts
from quiz_llm_gateway.rows.tables import BudgetDay, CapLease, LedgerEntry, RateEvent, Reservation
from quiz_servicekit.db import Database

log = logging.getLogger(__name__)

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


def outage_error(error: BaseException, retry_after_s: float) -> ContractError | None:
    """`unavailable` with `retry_after_s` for a database that cannot be reached (a fault that
    passes, never `internal`); None for any other error."""
    if not is_outage(error):
        return None
    log.warning("database unreachable (%s): answered unavailable", type(error).__name__)
    return ContractError(
        ErrorCode.unavailable,
        "the gateway's database cannot be reached (nothing was charged); try again",
        retry_after_s=retry_after_s,
    )


LEDGER_COLUMNS = [c.name for c in LEDGER.columns if c.name != "id"]

# Column names come from our own table model, never from input.
_LEDGER_INSERT = "INSERT INTO llm_ledger ({}) VALUES ({})".format(  # noqa: S608
    ", ".join(LEDGER_COLUMNS), ", ".join(":" + c for c in LEDGER_COLUMNS)
)

# The refusal's ledger row of a rate check at its limit (`rate_admit`, from its answer `r`).
_REFUSAL_AT_LIMIT = "INSERT INTO llm_ledger ({}) SELECT {} FROM r WHERE NOT r.admitted".format(  # noqa: S608
    ", ".join(LEDGER_COLUMNS), ", ".join(":" + c for c in LEDGER_COLUMNS)
)

# The tail of PostgreSQL's settle statements (issue 31 item 6): the day's spent + reserved
# micro-USD just after this settle, the quota its reply tells without another read — the day
# row as `upd` left it (under its row lock: every hold and settle committed before ours, on any
# replica, and ours), else (a settle that changed no day row: a replay, a call that cost
# nothing) as the statement's snapshot found it; 0 before the day's first call.
_DAY_USED = (
    "SELECT COALESCE((SELECT used FROM upd), (SELECT spent_micros + reserved_micros "
    "FROM budget_days WHERE day = :hold_day), 0)"
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
        "spent_micros = spent_micros + :cost WHERE day = :day "
        "RETURNING spent_micros + reserved_micros"
    ),
    "ledger": _LEDGER_INSERT,
    # PostgreSQL only: the settle of a call held in a slice as one statement (issue 24).
    "settle_sliced": (
        "WITH ins AS (" + _LEDGER_INSERT + " ON CONFLICT (call_id, attempt) DO NOTHING "  # noqa: S608
        "RETURNING 1), "
        "lease AS (UPDATE cap_leases SET amount_micros = amount_micros - :lease_cost "
        "WHERE id = :lease_id AND amount_micros >= :lease_cost AND EXISTS (SELECT 1 FROM ins) "
        "RETURNING 1), "
        "upd AS (UPDATE budget_days SET reserved_micros = reserved_micros - "
        "CASE WHEN EXISTS (SELECT 1 FROM lease) THEN :lease_cost ELSE 0 END, "
        "spent_micros = spent_micros + :cost_micros "
        "WHERE day = :hold_day AND EXISTS (SELECT 1 FROM ins) "
        "RETURNING spent_micros + reserved_micros AS used) " + _DAY_USED
    ),
    # A settle may be written twice (a replayed journal entry, a commit whose answer was
    # lost): the second is a no-op, keyed by (call_id, attempt).
    "ledger_once": _LEDGER_INSERT + " ON CONFLICT (call_id, attempt) DO NOTHING",
    # PostgreSQL only (issue 32): a settle of a hold of its own (or of none: a refusal, a
    # slice's call that cost nothing) as one statement — the ledger row once, then the hold's
    # release and the cost on the day row only when the row was new (LedgerRows._settle_in's
    # three steps).
    "settle_held": (
        "WITH ins AS (" + _LEDGER_INSERT + " ON CONFLICT (call_id, attempt) DO NOTHING "  # noqa: S608
        "RETURNING 1), "
        "gone AS (DELETE FROM reservations WHERE id = :hold_id AND EXISTS (SELECT 1 FROM ins) "
        "RETURNING amount_micros), "
        "upd AS (UPDATE budget_days SET reserved_micros = reserved_micros - "
        "COALESCE((SELECT SUM(amount_micros) FROM gone), 0), "
        "spent_micros = spent_micros + :cost_micros "
        "WHERE day = :hold_day AND EXISTS (SELECT 1 FROM ins) "
        "AND (EXISTS (SELECT 1 FROM gone) OR :cost_micros > 0) "
        "RETURNING spent_micros + reserved_micros AS used) " + _DAY_USED
    ),
    # PostgreSQL only (issue 32): one rate check as one statement, its own transaction when
    # alone — the function `llm_rate_admit` (migration 0008) takes the key's lock, then counts
    # under it (a query of its own, so its snapshot sees every earlier holder's events) and
    # inserts the event under the limit, or gives the window's times at it (retry_after_s);
    # the refusal's ledger row is written from its answer. Its transaction does not wait for
    # its WAL flush (rows/rates.py says why).
    "rate_admit": (
        "WITH r AS (SELECT * FROM llm_rate_admit(CAST(:rate_key AS text), "  # noqa: S608
        "CAST(:rate_at AS double precision), CAST(:since AS double precision), "
        "CAST(:limit AS integer), true)), "
        "refused AS (" + _REFUSAL_AT_LIMIT + " RETURNING 1) "
        "SELECT r.admitted, r.times, r.counted FROM r"
    ),
    "rate_lock": "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))",
    # Events that left the window are not read (the sweep deletes them): one statement less
    # per call than pruning the key first.
    "rate_times": "SELECT at FROM rate_events WHERE key = :key AND at > :since",
    "rate_insert": "INSERT INTO rate_events (key, at) VALUES (:key, :at)",
    # Issue 31: the quota read in one statement — no longer on a reply's path (the settle and
    # the rate check tell it, `Admission.counted`, `settle_many`); bench/llm_gateway_quota.py.
    "quota": (
        "SELECT (SELECT spent_micros + reserved_micros FROM budget_days WHERE day = :day), "
        "(SELECT COUNT(*) FROM rate_events WHERE key = :key AND at > :since)"
    ),
    # SQLite's rate-only check (issue 31: the count is the reply's remaining_calls), then
    # `rate_insert` under the limit: exact under its writer lock, taken at BEGIN IMMEDIATE.
    "rate_count": "SELECT COUNT(*) FROM rate_events WHERE key = :key AND at > :since",
    # Issue 24: the rate-only transaction does not wait for its WAL flush (admit_rates), set
    # in the statement of the first key's lock.
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


class LedgerRow(JournalLedgerRow):
    """One row of `llm_ledger`: a provider attempt or a refusal. Never any prompt text.

    Its fields are the contract's (`quiz_contracts.llm_journal.JournalLedgerRow`, written once
    there: a journaled settle carries this very row, its JSON signed by the journal's MAC),
    frozen here. Never a negative cost or count, whoever builds it (issue 29: the contract's
    `ge=0`); `attempt` is 0 for a refusal, else 1 or 2 (the second after an unreadable reply);
    `outcome` ok, unreadable, cut, error, provider_error or refused.
    """

    model_config = ConfigDict(frozen=True)


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
    """Whether a call was admitted; if not, the error code and when to retry; the rate count."""

    admitted: bool
    refused: str | None = None
    retry_after_s: float | None = None
    # The key's calls counted in its window before this one, when a rate was checked (issue 31:
    # the reply's remaining_calls = limit − counted − 1, no read of its own).
    counted: int | None = None


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


class Tables:
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
