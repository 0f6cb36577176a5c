"""SQLModel tables of the gateway: the day's budget, open reservations, the ledger, rate events."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Double,
    Index,
    Integer,
    String,
    Text,
)
from sqlmodel import Field, SQLModel

# The alembic scripts that create these tables (servicekit's run_env, in migrations/env.py).
MIGRATIONS = Path(__file__).parent.parent / "migrations"


class BudgetDay(SQLModel, table=True):
    """One row per Zurich day: spent + reserved never exceeds cap (one conditional UPDATE)."""

    __tablename__ = "budget_days"

    day: date = Field(sa_column=Column(Date, primary_key=True))
    cap_micros: int = Field(sa_column=Column(BigInteger, nullable=False))
    reserved_micros: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    spent_micros: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))


class Reservation(SQLModel, table=True):
    """A provider request's worst-case cost, held until settled or expired."""

    __tablename__ = "reservations"
    __table_args__ = (
        Index("ix_reservations_expires_at", "expires_at"),
        Index("ix_reservations_day_purpose", "day", "purpose"),
    )

    id: str = Field(sa_column=Column(String(36), primary_key=True))
    call_id: str = Field(sa_column=Column(String(36), nullable=False))
    request_id: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    day: date = Field(sa_column=Column(Date, nullable=False))
    amount_micros: int = Field(sa_column=Column(BigInteger, nullable=False))
    created_at: float = Field(sa_column=Column(Double, nullable=False))
    expires_at: float = Field(sa_column=Column(Double, nullable=False))
    # Since 0002: what usage's held_by_purpose splits by (null on holds made before it).
    purpose: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    has_person: bool | None = Field(default=None, sa_column=Column(Boolean, nullable=True))


class CapLease(SQLModel, table=True):
    """A slice of a day's cap leased by one replica (issue 24): its amount is in the day's
    `reserved_micros` until settles move it to `spent_micros` or the replica returns it; a
    slice past `expires_at` (its replica died) is returned by any replica's sweep."""

    __tablename__ = "cap_leases"
    __table_args__ = (Index("ix_cap_leases_expires_at", "expires_at"),)

    id: str = Field(sa_column=Column(String(36), primary_key=True))
    day: date = Field(sa_column=Column(Date, nullable=False))
    amount_micros: int = Field(sa_column=Column(BigInteger, nullable=False))
    created_at: float = Field(sa_column=Column(Double, nullable=False))
    expires_at: float = Field(sa_column=Column(Double, nullable=False))


class LedgerEntry(SQLModel, table=True):
    """One row per provider attempt or refusal: who, why, which model, tokens, cost, outcome."""

    __tablename__ = "llm_ledger"
    __table_args__ = (
        Index("ix_llm_ledger_day_purpose", "day", "purpose"),
        Index("ix_llm_ledger_day_billed_to", "day", "billed_to"),
        Index("ix_llm_ledger_request_id", "request_id"),
        Index("ux_llm_ledger_call_attempt", "call_id", "attempt", unique=True),
    )

    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    day: date = Field(sa_column=Column(Date, nullable=False))
    call_id: str = Field(sa_column=Column(String(36), nullable=False))
    attempt: int = Field(sa_column=Column(Integer, nullable=False))
    purpose: str = Field(sa_column=Column(String(32), nullable=False))
    person: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    billed_to: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    model: str = Field(sa_column=Column(String(100), nullable=False))
    effort: str = Field(sa_column=Column(String(16), nullable=False))
    input_tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
    output_tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
    cost_micros: int = Field(sa_column=Column(BigInteger, nullable=False))
    reserved_micros: int = Field(sa_column=Column(BigInteger, nullable=False))
    outcome: str = Field(sa_column=Column(String(32), nullable=False))
    error_code: str | None = Field(default=None, sa_column=Column(String(64), nullable=True))
    provider_requests: int = Field(sa_column=Column(Integer, nullable=False))
    latency_ms: int = Field(sa_column=Column(Integer, nullable=False))
    request_id: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    trace_id: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))


class RateEvent(SQLModel, table=True):
    """One admitted call of a (person, purpose) key: the sliding log of the rate limit."""

    __tablename__ = "rate_events"
    __table_args__ = (Index("ix_rate_events_key_at", "key", "at"),)

    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    key: str = Field(sa_column=Column(String(300), nullable=False))
    at: float = Field(sa_column=Column(Double, nullable=False))


class IdempotencyKey(SQLModel, table=True):
    """A request_id seen by any replica: its request's digest, the call answering it, and the
    reply once there is one (kept `idempotency_ttl_s`, then pruned by the sweep)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idempotency_keys_expires_at", "expires_at"),)

    key: str = Field(sa_column=Column(String(300), primary_key=True))
    digest: str = Field(sa_column=Column(String(64), nullable=False))
    call_id: str = Field(sa_column=Column(String(36), nullable=False))
    reply: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float = Field(sa_column=Column(Double, nullable=False))
    expires_at: float = Field(sa_column=Column(Double, nullable=False))


class GatewayIdentity(SQLModel, table=True):
    """The database's id, made once by migration 0005: the subject of its journal entries
    (`llm.v1.journal.<id>`), so a replica never replays another database's settles."""

    __tablename__ = "gateway_identity"

    id: str = Field(sa_column=Column(String(32), primary_key=True))
