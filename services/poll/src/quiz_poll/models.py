"""SQLModel tables of poll; alembic revisions under migrations/versions.

Times are epoch seconds (`Double`): the lease's conditions compare them in SQL, alike on SQLite
and PostgreSQL. JSON payloads are text (`{ideas: [...]}`, a roster, an audit record).

- `polls`: one brainstorm per evaluation (BrainstormOpen): the question, its switches, who pays
  for the AI, when it closed and froze, `version` (the live frames' `seq`, one per change) and,
  once frozen, the board and tally it keeps showing (`frozen_view`).
- `poll_participants`: the joined attempts (PollJoin), a guest or an account with its name for
  masking; `ord` orders them by first appearance.
- `poll_answers`: one row per attempt, its whole answer (`{ideas}`); `ord` (an autoincrement
  id kept by the upsert) is the participants' order the board's "first seen" reads.
- `poll_idea_marks`: the teacher's (or the model's) word on an idea, keyed by idea key.
- `poll_ai_runs`: the AI lease, heartbeat, call count and last failure (ADR-072 §12–§13).
- `poll_audit`: every teacher action (`poll.ideas`) and switch (`poll.reveal`), before/after.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlmodel import Field, SQLModel

__all__ = [
    "MIGRATIONS",
    "Poll",
    "PollAiRunRow",
    "PollAnswerRow",
    "PollAuditRow",
    "PollIdeaMarkRow",
    "PollParticipantRow",
    "SQLModel",
]

# The alembic scripts of these tables (servicekit's run_env, in migrations/env.py).
MIGRATIONS = Path(__file__).parent / "migrations"

_ID = 64


class Poll(SQLModel, table=True):
    """One brainstorm, per evaluation."""

    __tablename__ = "polls"
    __table_args__ = (Index("ix_polls_closed_at", "closed_at"),)

    evaluation_id: str = Field(sa_column=Column(String(_ID), primary_key=True))
    again_of: str | None = Field(default=None, sa_column=Column(String(_ID), nullable=True))
    teacher_id: str = Field(sa_column=Column(String(200), nullable=False))
    anonymous: bool = Field(sa_column=Column(Boolean, nullable=False))
    classroom_id: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    prompt: str = Field(sa_column=Column(Text, nullable=False))
    max_ideas: int = Field(sa_column=Column(Integer, nullable=False))
    roster: str = Field(sa_column=Column(Text, nullable=False))
    votes: bool = Field(sa_column=Column(Boolean, nullable=False))
    moderation: bool = Field(sa_column=Column(Boolean, nullable=False))
    ai: bool = Field(sa_column=Column(Boolean, nullable=False))
    version: int = Field(sa_column=Column(BigInteger, nullable=False))
    opened_at: float = Field(sa_column=Column(Double, nullable=False))
    closed_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    frozen_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    frozen_view: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class PollParticipantRow(SQLModel, table=True):
    """A joined attempt: a guest, or an account whose name and e-mail are masked."""

    __tablename__ = "poll_participants"
    __table_args__ = (UniqueConstraint("evaluation_id", "attempt_id"),)

    ord: int | None = Field(
        default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True)
    )
    evaluation_id: str = Field(sa_column=Column(String(_ID), nullable=False))
    attempt_id: str = Field(sa_column=Column(String(200), nullable=False))
    kind: str = Field(sa_column=Column(String(10), nullable=False))
    user_id: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    person: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    joined_at: float = Field(sa_column=Column(Double, nullable=False))


class PollAnswerRow(SQLModel, table=True):
    """An attempt's whole answer now."""

    __tablename__ = "poll_answers"
    __table_args__ = (UniqueConstraint("evaluation_id", "attempt_id"),)

    ord: int | None = Field(
        default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True)
    )
    evaluation_id: str = Field(sa_column=Column(String(_ID), nullable=False))
    attempt_id: str = Field(sa_column=Column(String(200), nullable=False))
    guest: bool = Field(sa_column=Column(Boolean, nullable=False))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    updated_at: float = Field(sa_column=Column(Double, nullable=False))


class PollIdeaMarkRow(SQLModel, table=True):
    """One idea's mark, keyed by (evaluation, idea key), never attempt (ADR-071 §3)."""

    __tablename__ = "poll_idea_marks"

    evaluation_id: str = Field(sa_column=Column(String(_ID), primary_key=True))
    key: str = Field(sa_column=Column(String(200), primary_key=True))
    status: str | None = Field(default=None, sa_column=Column(String(10), nullable=True))
    merged_into: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    label: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    correction: str | None = Field(default=None, sa_column=Column(String(100), nullable=True))
    source: str = Field(sa_column=Column(String(10), nullable=False))
    # The approved spellings (a JSON list, as the room reads them), null for none (0002).
    seen: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # There when the AI was switched on: never sent to the model, not even as context (0002).
    teacher_only: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    updated_at: float = Field(sa_column=Column(Double, nullable=False))


class PollAiRunRow(SQLModel, table=True):
    """The AI lease of one poll, held across replicas by conditional UPDATEs."""

    __tablename__ = "poll_ai_runs"

    evaluation_id: str = Field(sa_column=Column(String(_ID), primary_key=True))
    lease_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    heartbeat_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    calls: int = Field(sa_column=Column(Integer, nullable=False))
    error: str | None = Field(default=None, sa_column=Column(String(40), nullable=True))
    error_at: float | None = Field(default=None, sa_column=Column(Double, nullable=True))
    # The batch sent under the lease and not yet answered (JSON; migration 0003).
    pending: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class PollAuditRow(SQLModel, table=True):
    """One audited teacher action (`poll.ideas`, `poll.reveal`)."""

    __tablename__ = "poll_audit"
    __table_args__ = (Index("ix_poll_audit_evaluation", "evaluation_id", "id"),)

    id: int | None = Field(
        default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True)
    )
    evaluation_id: str = Field(sa_column=Column(String(_ID), nullable=False))
    actor: str = Field(sa_column=Column(String(200), nullable=False))
    action: str = Field(sa_column=Column(String(40), nullable=False))
    record: str = Field(sa_column=Column(Text, nullable=False))
    at: float = Field(sa_column=Column(Double, nullable=False))
