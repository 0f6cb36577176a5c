"""The AI run of a poll (`poll_ai_runs`, ADR-072 §12): its lease, heartbeat, calls, failure.

The lease is claimed, beaten and released by conditional UPDATEs: two replicas never both hold it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import Connection

from quiz_contracts.poll import PollAiError, PollAiRun
from quiz_poll.domain import ai_run
from quiz_poll.domain.ai_run import (
    ERROR_COOLDOWN,
    LEASE_STALE,
    PASS_ALIVE,
    RUN_CAP,
    board_error,
)
from quiz_poll.repository.base import RepositoryBase
from quiz_poll.repository.rows import AiRunRow
from quiz_servicekit.db import read_only, transaction
from quiz_servicekit.lease_time import stale_before

_STALE_S = LEASE_STALE.total_seconds()
_ALIVE_S = PASS_ALIVE.total_seconds()
_COOLDOWN_S = ERROR_COOLDOWN.total_seconds()

# The columns of `poll_ai_runs` a lease step writes (`AiRunSteps._write_run`), in the order the
# "run" statement reads them; each step's UPDATE sets them all.
_RUN_COLUMNS = ("lease_at", "heartbeat_at", "calls", "error", "error_at")


def _at(ts: float | None) -> datetime | None:
    """A stored epoch-seconds time as the lease rules read it."""
    return None if ts is None else _instant(ts)


def _instant(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _holding(
    lease: float, step: Callable[[PollAiRun, datetime], PollAiRun]
) -> Callable[[PollAiRun, datetime], PollAiRun | None]:
    """`step`, for the pass that holds `lease` only (`ai_run.holds`)."""

    def rule(run: PollAiRun, at: datetime) -> PollAiRun | None:
        return step(run, at) if ai_run.holds(run, _instant(lease)) else None

    return rule


class AiRunSteps(RepositoryBase):
    """The AI run of a poll (`poll_ai_runs`): its lease, heartbeat, calls, failure, kept batch.

    Each step reads the row (locked: PostgreSQL `FOR UPDATE`; SQLite's writer lock is taken at
    BEGIN), asks its pure rule (`domain.ai_run`) for the row after it, and writes that row by a
    conditional UPDATE whose WHERE is the rule again: two replicas never both hold the lease.
    """

    SQL: ClassVar[dict[str, str]] = {
        # --- the AI lease (FACTS D "Batches") --------------------------------------------------
        # Each step writes the row its pure rule (`domain.ai_run`) gave for the row it read (locked:
        # PostgreSQL `FOR UPDATE`, SQLite's writer lock taken at BEGIN), under the rule's own
        # condition again as the UPDATE's WHERE: across replicas the database row decides.
        "run_ensure": (
            "INSERT INTO poll_ai_runs (evaluation_id, calls) VALUES (:e, 0)"
            " ON CONFLICT (evaluation_id) DO NOTHING"
        ),
        "run": (
            "SELECT lease_at, heartbeat_at, calls, error, error_at FROM poll_ai_runs"
            " WHERE evaluation_id = :e"
        ),
        "run_locked": (
            "SELECT lease_at, heartbeat_at, calls, error, error_at FROM poll_ai_runs"
            " WHERE evaluation_id = :e FOR UPDATE"
        ),
        # Free when null or its heartbeat is over 60 s old, AND no failure or one over 30 s old.
        "run_claim": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at, pending = NULL"
            " WHERE evaluation_id = :e"
            " AND (lease_at IS NULL OR COALESCE(heartbeat_at, lease_at) < :stale)"
            " AND (error IS NULL OR error_at IS NULL OR error_at < :cool) AND calls < :cap"
        ),
        "run_beat": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at"
            " WHERE evaluation_id = :e AND lease_at = :lease"
        ),
        # A pass that stops for its job to be delivered again keeps the lease, not its heartbeat:
        # the redelivery (on any replica) sees no pass running (`pass_running`).
        # A pass starts under its lease only when no other pass of it beats (`pass_running`):
        # atomic, so two deliveries of one job due at the same instant cannot both start.
        "run_start": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at"
            " WHERE evaluation_id = :e AND lease_at = :lease"
            " AND (heartbeat_at IS NULL OR heartbeat_at <= lease_at OR heartbeat_at < :alive)"
        ),
        "run_keep_pending": (
            "UPDATE poll_ai_runs SET pending = :pending"
            " WHERE evaluation_id = :e AND lease_at = :lease"
        ),
        "run_pending": (
            "SELECT pending FROM poll_ai_runs WHERE evaluation_id = :e AND lease_at = :lease"
        ),
        "run_pause": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at"
            " WHERE evaluation_id = :e AND lease_at = :lease"
        ),
        # The steps that end a call (or the pass) forget the batch kept for it.
        "run_end": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at, pending = NULL"
            " WHERE evaluation_id = :e AND lease_at = :lease"
        ),
        "run_switch": (
            "UPDATE poll_ai_runs SET lease_at = :lease_at, heartbeat_at = :heartbeat_at,"
            " calls = :calls, error = :error, error_at = :error_at, pending = NULL"
            " WHERE evaluation_id = :e"
        ),
    }

    @read_only
    def ai_run(self, conn: Connection, evaluation_id: str) -> AiRunRow | None:
        """The poll's AI run, or None before any."""
        row = conn.exec_driver_sql(self._sql["run"], {"e": evaluation_id}).first()
        if row is None:
            return None
        return AiRunRow(
            lease_at=row[0],
            heartbeat_at=row[1],
            calls=int(row[2]),
            error=None if row[3] is None else board_error(row[3]),
            error_at=row[4],
        )

    def _read_run(self, conn: Connection, evaluation_id: str) -> tuple[Any, PollAiRun] | None:
        """The row as stored and as the rules read it, locked until the transaction ends."""
        locked = self._sql["run_locked" if self.db.dialect == "postgresql" else "run"]
        row = conn.exec_driver_sql(locked, {"e": evaluation_id}).first()
        if row is None:
            return None
        run = PollAiRun(
            evaluation_id=evaluation_id,
            lease_at=_at(row[0]),
            heartbeat_at=_at(row[1]),
            calls=int(row[2]),
            error=None if row[3] is None else board_error(row[3]),
            error_at=_at(row[4]),
        )
        return row, run

    def _step(
        self,
        conn: Connection,
        statement: str,
        evaluation_id: str,
        now: float,
        rule: Callable[[PollAiRun, datetime], PollAiRun | None],
        **where: Any,
    ) -> PollAiRun | None:
        """One step of the run: `rule(row, now)` gives the row after it (None: refused), written
        by the conditional UPDATE `statement` (`where`: its condition's parameters); the row
        written, or None when the rule or the UPDATE refused."""
        read = self._read_run(conn, evaluation_id)
        if read is None:
            return None
        stored, before = read
        after = rule(before, _instant(now))
        if after is None:
            return None
        done = self._write_run(conn, statement, stored, before, after, now, **where)
        return after if done else None

    def _write_run(
        self,
        conn: Connection,
        statement: str,
        stored: Any,
        before: PollAiRun,
        after: PollAiRun,
        now: float | None,
        **where: Any,
    ) -> bool:
        """Write `after` (the rule's row for `before`, read as `stored`) by `statement`."""
        params = {"e": before.evaluation_id, **where}
        for index, column in enumerate(_RUN_COLUMNS):
            new = getattr(after, column)
            if new is getattr(before, column):  # the rule left it: the stored value, exactly
                params[column] = stored[index]
            elif new is None:
                params[column] = None
            elif column == "calls":
                params[column] = int(new)
            elif column == "error":
                params[column] = PollAiError(new).value
            elif now is not None and new == _instant(now):
                params[column] = now  # a time the rule set to now: its epoch seconds
            else:
                raise ValueError(f"poll_ai_runs.{column}: a time the lease rules never write")
        return conn.exec_driver_sql(self._sql[statement], params).rowcount == 1

    @transaction
    def claim(self, conn: Connection, evaluation_id: str, now: float) -> bool:
        """Claim the lease (null or stale, not within 30 s of a failure, under the cap)."""
        conn.exec_driver_sql(self._sql["run_ensure"], {"e": evaluation_id})

        def rule(run: PollAiRun, at: datetime) -> PollAiRun | None:
            claimed = ai_run.claim(run, evaluation_id, at)
            return None if claimed is None else claimed.run

        where = {"stale": stale_before(now, _STALE_S), "cool": now - _COOLDOWN_S, "cap": RUN_CAP}
        return self._step(conn, "run_claim", evaluation_id, now, rule, **where) is not None

    @transaction
    def beat(self, conn: Connection, evaluation_id: str, lease: float, now: float) -> int | None:
        """The heartbeat of the pass holding `lease`; the run's calls, or None when it lost it."""
        run = self._beat(conn, evaluation_id, lease, now)
        return None if run is None else run.calls

    @transaction
    def beat_pass(
        self, conn: Connection, evaluation_id: str, lease: float, now: float
    ) -> PollAiRun | None:
        """`beat`, the row after it (for `ai_run.before_call`); None when the pass lost it."""
        return self._beat(conn, evaluation_id, lease, now)

    def _beat(
        self, conn: Connection, evaluation_id: str, lease: float, now: float
    ) -> PollAiRun | None:
        rule = _holding(lease, ai_run.heartbeat)
        return self._step(conn, "run_beat", evaluation_id, now, rule, lease=lease)

    @transaction
    def start_pass(self, conn: Connection, evaluation_id: str, lease: float, now: float) -> bool:
        """Start the pass of `lease`: True when started; False when the lease is gone or
        another pass of it is running (`pass_running` tells which from `ai_run`)."""
        read = self._read_run(conn, evaluation_id)
        if read is None:
            return False
        stored, run = read
        # The stored epoch seconds, not a datetime's: the claim's heartbeat equals its lease.
        if not ai_run.holds(run, _instant(lease)) or ai_run.pass_running(
            stored[0], stored[1], lease, now
        ):
            return False
        started = ai_run.heartbeat(run, _instant(now))
        where = {"lease": lease, "alive": stale_before(now, _ALIVE_S)}
        return self._write_run(conn, "run_start", stored, run, started, now, **where)

    @transaction
    def keep_pending(
        self, conn: Connection, evaluation_id: str, lease: float, pending: str
    ) -> None:
        """Write the batch the pass of `lease` is about to send (JSON), before the call."""
        p = {"e": evaluation_id, "lease": lease, "pending": pending}
        conn.exec_driver_sql(self._sql["run_keep_pending"], p)

    @read_only
    def pending(self, conn: Connection, evaluation_id: str, lease: float) -> str | None:
        """The batch sent under `lease` whose verdicts are not written yet, or None."""
        row = conn.exec_driver_sql(
            self._sql["run_pending"], {"e": evaluation_id, "lease": lease}
        ).first()
        return None if row is None else row[0]

    @transaction
    def pause(self, conn: Connection, evaluation_id: str, lease: float) -> None:
        """The pass of `lease` stopped and its job comes again: the lease kept, no heartbeat."""
        read = self._read_run(conn, evaluation_id)
        if read is not None and ai_run.holds(read[1], _instant(lease)):
            stored, run = read
            self._write_run(conn, "run_pause", stored, run, ai_run.pause(run), None, lease=lease)

    @transaction
    def after_success(self, conn: Connection, evaluation_id: str, lease: float, now: float) -> bool:
        """One more call, the failure cleared; False when the pass lost its lease meanwhile."""
        rule = _holding(lease, ai_run.after_success)
        return self._step(conn, "run_end", evaluation_id, now, rule, lease=lease) is not None

    @transaction
    def after_failure(
        self, conn: Connection, evaluation_id: str, lease: float, error: PollAiError, now: float
    ) -> None:
        """Fail closed: the code for the board, dated for the cool-down; the lease freed."""
        rule = _holding(lease, lambda run, at: ai_run.after_failure(run, error, at))
        self._step(conn, "run_end", evaluation_id, now, rule, lease=lease)

    @transaction
    def release(self, conn: Connection, evaluation_id: str, lease: float, now: float) -> None:
        """Nothing left to judge: the lease is free for the next answer."""
        self._step(
            conn, "run_end", evaluation_id, now, _holding(lease, ai_run.release), lease=lease
        )
