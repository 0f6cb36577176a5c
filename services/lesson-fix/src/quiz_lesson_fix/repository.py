"""Every SQL statement of lesson-fix: the per-person rate limit, shared by every replica."""

from __future__ import annotations

from sqlalchemy import Connection

from quiz_lesson_fix.domain.ratelimit import RateDecision, admit
from quiz_servicekit.db import Database, transaction

# Plain SQL valid on SQLite and PostgreSQL alike (`Database.sql` adapts the parameter style).
SQL: dict[str, str] = {
    # The row exists before it is locked, so two replicas' first requests cannot both insert.
    "ensure": (
        "INSERT INTO fix_rate_limits (person, tat) VALUES (:person, :now) "
        "ON CONFLICT (person) DO NOTHING"
    ),
    "read": "SELECT tat FROM fix_rate_limits WHERE person = :person",
    "read_locked": "SELECT tat FROM fix_rate_limits WHERE person = :person FOR UPDATE",
    "write": "UPDATE fix_rate_limits SET tat = :tat WHERE person = :person",
    "prune": "DELETE FROM fix_rate_limits WHERE tat < :before",
}


class RateLimitRepository:
    """The token buckets of "Fix with AI", one row per person (GCRA, domain/ratelimit.py)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = {name: db.sql(statement) for name, statement in SQL.items()}

    @transaction
    def take(
        self, conn: Connection, person: str, now: float, limit: int, window_s: float
    ) -> RateDecision:
        """Take one token from `person`'s bucket, or say how long until one is back.

        One transaction: the row is locked (PostgreSQL `FOR UPDATE`; SQLite's writer lock is
        taken at BEGIN), so concurrent requests of one person on any replica queue on it and
        never both take the last token.
        """
        q = self._sql
        conn.exec_driver_sql(q["ensure"], {"person": person, "now": now})
        read = q["read_locked"] if self.db.dialect == "postgresql" else q["read"]
        tat = conn.exec_driver_sql(read, {"person": person}).scalar_one()
        decision = admit(float(tat), now, limit, window_s)
        if decision.allowed:
            conn.exec_driver_sql(q["write"], {"person": person, "tat": decision.tat})
        return decision

    @transaction
    def prune(self, conn: Connection, before: float) -> int:
        """Forget the buckets that are full again (their `tat` passed): they hold nothing."""
        return conn.exec_driver_sql(self._sql["prune"], {"before": before}).rowcount
