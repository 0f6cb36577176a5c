"""Every SQL statement of poll: polls, participants, answers, marks, the AI lease, the audit.

Each operation is one transaction on servicekit's `Database`. Every change a room can see bumps
`polls.version` in the same transaction: that number is the live frames' `seq`, so replicas and
restarts agree on it. The AI lease is claimed, beaten, and released by conditional UPDATEs
(`poll_ai_runs`, ADR-072 §12): two replicas never both hold it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark, MaskedPerson, PollAiError, PollAiRun, PollParticipant
from quiz_poll.domain import ai_run
from quiz_poll.domain.ai_run import (
    ERROR_COOLDOWN,
    LEASE_STALE,
    PASS_ALIVE,
    RUN_CAP,
    board_error,
)
from quiz_servicekit.db import Database, read_only, transaction
from quiz_servicekit.lease_time import stale_before

_STALE_S = LEASE_STALE.total_seconds()
_ALIVE_S = PASS_ALIVE.total_seconds()
_COOLDOWN_S = ERROR_COOLDOWN.total_seconds()

# The columns of `poll_ai_runs` a lease step writes (`AiRunSteps._write_run`), in the order the
# "run" statement reads them; each step's UPDATE sets them all: `_SET_RUN` below.
_RUN_COLUMNS = ("lease_at", "heartbeat_at", "calls", "error", "error_at")

SQL: dict[str, str] = {
    "insert_poll": (
        "INSERT INTO polls (evaluation_id, again_of, teacher_id, anonymous, classroom_id, prompt,"
        " max_ideas, roster, votes, moderation, ai, version, opened_at)"
        " VALUES (:e, :again_of, :teacher_id, :anonymous, :classroom_id, :prompt, :max_ideas,"
        " :roster, :votes, :moderation, :ai, 1, :now) ON CONFLICT (evaluation_id) DO NOTHING"
    ),
    "poll": (
        "SELECT evaluation_id, again_of, teacher_id, anonymous, classroom_id, prompt, max_ideas,"
        " roster, votes, moderation, ai, version, opened_at, closed_at, frozen_at, frozen_view"
        " FROM polls WHERE evaluation_id = :e"
    ),
    "bump": "UPDATE polls SET version = version + 1 WHERE evaluation_id = :e RETURNING version",
    "bump_by": (
        "UPDATE polls SET version = version + :n WHERE evaluation_id = :e RETURNING version"
    ),
    "close": (
        "UPDATE polls SET closed_at = :at, version = version + 1"
        " WHERE evaluation_id = :e AND closed_at IS NULL"
    ),
    "switches": (
        "UPDATE polls SET votes = :votes, moderation = :moderation, ai = :ai,"
        " version = version + 1 WHERE evaluation_id = :e RETURNING version"
    ),
    "join": (
        "INSERT INTO poll_participants (evaluation_id, attempt_id, kind, user_id, person,"
        " joined_at) VALUES (:e, :a, :kind, :user_id, :person, :now)"
        " ON CONFLICT (evaluation_id, attempt_id) DO NOTHING"
    ),
    "join_person": (
        "UPDATE poll_participants SET person = :person WHERE evaluation_id = :e"
        " AND attempt_id = :a AND kind = 'account'"
    ),
    "participants": (
        "SELECT attempt_id, kind, user_id, person FROM poll_participants"
        " WHERE evaluation_id = :e ORDER BY ord"
    ),
    "upsert_answer": (
        "INSERT INTO poll_answers (evaluation_id, attempt_id, guest, payload, updated_at)"
        " VALUES (:e, :a, :guest, :payload, :now) ON CONFLICT (evaluation_id, attempt_id)"
        " DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at"
    ),
    "answer": "SELECT payload FROM poll_answers WHERE evaluation_id = :e AND attempt_id = :a",
    "answers": (
        "SELECT attempt_id, payload FROM poll_answers WHERE evaluation_id = :e ORDER BY ord"
    ),
    "marks": (
        "SELECT key, status, merged_into, label, correction, source, seen, teacher_only"
        " FROM poll_idea_marks WHERE evaluation_id = :e"
    ),
    "upsert_mark": (
        "INSERT INTO poll_idea_marks (evaluation_id, key, status, merged_into, label,"
        " correction, source, seen, teacher_only, updated_at) VALUES (:e, :key, :status,"
        " :merged_into, :label, :correction, :source, :seen, :teacher_only, :now)"
        " ON CONFLICT (evaluation_id, key) DO UPDATE SET"
        " status = excluded.status, merged_into = excluded.merged_into, label = excluded.label,"
        " correction = excluded.correction, source = excluded.source, seen = excluded.seen,"
        " teacher_only = excluded.teacher_only, updated_at = excluded.updated_at"
    ),
    # The model writes only where no mark exists: a teacher who acted first keeps the last word.
    "insert_mark": (
        "INSERT INTO poll_idea_marks (evaluation_id, key, status, merged_into, label,"
        " correction, source, seen, teacher_only, updated_at) VALUES (:e, :key, :status,"
        " :merged_into, :label, :correction, :source, :seen, :teacher_only, :now)"
        " ON CONFLICT (evaluation_id, key) DO NOTHING"
    ),
    # AI switched on: every idea there stays with the teacher; a mark that exists (whoever
    # wrote it, on any replica) keeps everything else.
    "retro_mark": (
        "INSERT INTO poll_idea_marks (evaluation_id, key, status, merged_into, label,"
        " correction, source, seen, teacher_only, updated_at) VALUES (:e, :key, :status,"
        " :merged_into, :label, :correction, :source, :seen, :teacher_only, :now)"
        " ON CONFLICT (evaluation_id, key) DO UPDATE SET teacher_only = excluded.teacher_only,"
        " updated_at = excluded.updated_at"
    ),
    "audit": (
        "INSERT INTO poll_audit (evaluation_id, actor, action, record, at)"
        " VALUES (:e, :actor, :action, :record, :now)"
    ),
    "audit_list": (
        "SELECT actor, action, record, at FROM poll_audit WHERE evaluation_id = :e ORDER BY id"
    ),
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
        "UPDATE poll_ai_runs SET pending = :pending WHERE evaluation_id = :e AND lease_at = :lease"
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
    # --- the freeze (amendment 2026-10-15) ---------------------------------------------------
    "due_freeze": (
        "SELECT evaluation_id FROM polls WHERE frozen_at IS NULL AND closed_at IS NOT NULL"
        " AND closed_at <= :before ORDER BY closed_at LIMIT :limit"
    ),
    "freeze": (
        "UPDATE polls SET frozen_at = :now, frozen_view = :view, version = version + 1"
        " WHERE evaluation_id = :e AND frozen_at IS NULL"
    ),
    "purge_guest_answers": "DELETE FROM poll_answers WHERE evaluation_id = :e AND guest = :yes",
    "purge_guests": ("DELETE FROM poll_participants WHERE evaluation_id = :e AND kind = 'guest'"),
}


@dataclass(frozen=True, slots=True)
class PollRow:
    """One brainstorm as stored."""

    evaluation_id: str
    again_of: str | None
    teacher_id: str
    anonymous: bool
    classroom_id: str | None
    prompt: str
    max_ideas: int
    roster: tuple[MaskedPerson, ...]
    votes: bool
    moderation: bool
    ai: bool
    version: int
    opened_at: float
    closed_at: float | None
    frozen_at: float | None
    frozen_view: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Joined:
    """A joined attempt, and the account's name for masking (None for a guest)."""

    participant: PollParticipant
    person: MaskedPerson | None


@dataclass(frozen=True, slots=True)
class PollState:
    """Everything a replica needs to serve a poll, read in one transaction."""

    poll: PollRow
    answers: list[tuple[str, object]]
    marks: list[IdeaMark]
    joined: list[Joined]


@dataclass(frozen=True, slots=True)
class AiRunRow:
    """The row of `poll_ai_runs`."""

    lease_at: float | None
    heartbeat_at: float | None
    calls: int
    error: PollAiError | None
    error_at: float | None


@dataclass(frozen=True, slots=True)
class AnswerToSave:
    """One participant's whole answer, for `save_answers`."""

    evaluation_id: str
    participant: PollParticipant
    ideas: list[str]


@dataclass(frozen=True, slots=True)
class NewPoll:
    """What `open` stores."""

    evaluation_id: str
    again_of: str | None
    teacher_id: str
    anonymous: bool
    classroom_id: str | None
    prompt: str
    max_ideas: int
    roster: Sequence[MaskedPerson]
    moderation: bool


def _poll(row: Any) -> PollRow:
    return PollRow(
        evaluation_id=row[0],
        again_of=row[1],
        teacher_id=row[2],
        anonymous=bool(row[3]),
        classroom_id=row[4],
        prompt=row[5],
        max_ideas=int(row[6]),
        roster=tuple(MaskedPerson.model_validate(p) for p in json.loads(row[7])),
        votes=bool(row[8]),
        moderation=bool(row[9]),
        ai=bool(row[10]),
        version=int(row[11]),
        opened_at=float(row[12]),
        closed_at=None if row[13] is None else float(row[13]),
        frozen_at=None if row[14] is None else float(row[14]),
        frozen_view=None if row[15] is None else json.loads(row[15]),
    )


def _mark_params(evaluation_id: str, mark: IdeaMark, now: float) -> dict[str, Any]:
    return {
        "e": evaluation_id,
        "key": mark.key,
        "status": mark.status,
        "merged_into": mark.merged_into,
        "label": mark.label,
        "correction": mark.correction,
        "source": mark.source,
        "seen": json.dumps(list(mark.seen), ensure_ascii=False) if mark.seen else None,
        "teacher_only": mark.teacher_only,
        "now": now,
    }


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


def _not_found() -> ContractError:
    return ContractError(ErrorCode.not_found, "poll not found")


class AiRunSteps:
    """The AI run of a poll (`poll_ai_runs`): its lease, heartbeat, calls, failure, kept batch.

    Each step reads the row (locked: PostgreSQL `FOR UPDATE`; SQLite's writer lock is taken at
    BEGIN), asks its pure rule (`domain.ai_run`) for the row after it, and writes that row by a
    conditional UPDATE whose WHERE is the rule again: two replicas never both hold the lease.
    Part of `PollRepository` (its `db` and statements).
    """

    db: Database
    _sql: dict[str, str]

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


class PollRepository(AiRunSteps):
    """The poll's tables (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = {name: db.sql(statement) for name, statement in SQL.items()}

    # --- polls -------------------------------------------------------------------------------

    @transaction
    def open(self, conn: Connection, new: NewPoll, now: float) -> bool:
        """Store a new brainstorm; False when the evaluation has one already (idempotent)."""
        return (
            conn.exec_driver_sql(
                self._sql["insert_poll"],
                {
                    "e": new.evaluation_id,
                    "again_of": new.again_of,
                    "teacher_id": new.teacher_id,
                    "anonymous": new.anonymous,
                    "classroom_id": new.classroom_id,
                    "prompt": new.prompt,
                    "max_ideas": new.max_ideas,
                    "roster": json.dumps([p.model_dump() for p in new.roster]),
                    "votes": False,
                    "moderation": new.moderation,
                    "ai": False,
                    "now": now,
                },
            ).rowcount
            == 1
        )

    def _poll_in(self, conn: Connection, evaluation_id: str) -> PollRow | None:
        row = conn.exec_driver_sql(self._sql["poll"], {"e": evaluation_id}).first()
        return None if row is None else _poll(row)

    def _bump(self, conn: Connection, evaluation_id: str) -> int:
        version = conn.exec_driver_sql(self._sql["bump"], {"e": evaluation_id}).scalar()
        if version is None:
            raise _not_found()
        return int(version)

    @read_only
    def poll(self, conn: Connection, evaluation_id: str) -> PollRow | None:
        """The poll, or None."""
        return self._poll_in(conn, evaluation_id)

    @read_only
    def state(self, conn: Connection, evaluation_id: str) -> PollState | None:
        """The poll, its answers (participants' order), its marks and who joined."""
        poll = self._poll_in(conn, evaluation_id)
        if poll is None:
            return None
        p = {"e": evaluation_id}
        answers = [
            (str(a), json.loads(payload))
            for a, payload in conn.exec_driver_sql(self._sql["answers"], p)
        ]
        marks = [
            IdeaMark(
                key=k,
                status=s,
                merged_into=m,
                label=lbl,
                correction=c,
                source=src,
                seen=tuple(json.loads(seen)) if seen else (),
                teacher_only=bool(only),
            )
            for k, s, m, lbl, c, src, seen, only in conn.exec_driver_sql(self._sql["marks"], p)
        ]
        joined = [
            Joined(
                PollParticipant(attempt_id=a, kind=kind, user_id=user),
                None if person is None else MaskedPerson.model_validate_json(person),
            )
            for a, kind, user, person in conn.exec_driver_sql(self._sql["participants"], p)
        ]
        return PollState(poll=poll, answers=answers, marks=marks, joined=joined)

    @transaction
    def close(self, conn: Connection, evaluation_id: str, closed_at: float) -> PollRow:
        """The End: no answer after; the first close counts (idempotent)."""
        conn.exec_driver_sql(self._sql["close"], {"e": evaluation_id, "at": closed_at})
        poll = self._poll_in(conn, evaluation_id)
        if poll is None:
            raise _not_found()
        return poll

    # --- participants and answers -------------------------------------------------------------

    @transaction
    def join(
        self,
        conn: Connection,
        evaluation_id: str,
        participant: PollParticipant,
        person: MaskedPerson | None,
        now: float,
    ) -> int | None:
        """A joined attempt; the new version when it was new (or its person changed), else None.

        A guest's person is never stored: nobody the platform knows (ADR-072 §14).
        """
        if self._poll_in(conn, evaluation_id) is None:
            raise _not_found()
        stored = None
        if participant.kind == "account" and person is not None:
            stored = person.model_dump_json()
        params = {
            "e": evaluation_id,
            "a": participant.attempt_id,
            "kind": participant.kind,
            "user_id": participant.user_id,
            "person": stored,
            "now": now,
        }
        new = conn.exec_driver_sql(self._sql["join"], params).rowcount == 1
        if not new and stored is not None:
            conn.exec_driver_sql(self._sql["join_person"], params)
        return self._bump(conn, evaluation_id) if new else None

    @transaction
    def save_answer(
        self,
        conn: Connection,
        evaluation_id: str,
        participant: PollParticipant,
        ideas: list[str],
        now: float,
    ) -> int:
        """Store an attempt's whole answer (it joins if it had not); the poll's new version.

        404 without the poll, 409 `poll_frozen` once it is frozen, and 422 `answer_invalid`
        once it closed (no answer after the End) — checked inside the same transaction.
        """
        refusal = self._answer_refusal(self._poll_in(conn, evaluation_id))
        if refusal is not None:
            raise refusal
        params = {
            "e": evaluation_id,
            "a": participant.attempt_id,
            "kind": participant.kind,
            "user_id": participant.user_id,
            "person": None,
            "guest": participant.kind == "guest",
            "payload": json.dumps({"ideas": ideas}, ensure_ascii=False),
            "now": now,
        }
        conn.exec_driver_sql(self._sql["join"], params)
        conn.exec_driver_sql(self._sql["upsert_answer"], params)
        return self._bump(conn, evaluation_id)

    @transaction
    def save_answers(
        self, conn: Connection, items: Sequence[AnswerToSave], now: float
    ) -> list[int | ContractError]:
        """Many participants' answers in one transaction (group commit): per item its version,
        or the error that refused it (the rules of `save_answer`, checked once per poll).

        The answers of one poll get consecutive versions in the order given.
        """
        by_poll: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            by_poll.setdefault(item.evaluation_id, []).append(index)
        out: list[int | ContractError] = [0] * len(items)
        for evaluation_id, indexes in by_poll.items():
            refusal = self._answer_refusal(self._poll_in(conn, evaluation_id))
            if refusal is not None:
                for index in indexes:
                    out[index] = refusal
                continue
            rows = [
                {
                    "e": evaluation_id,
                    "a": items[i].participant.attempt_id,
                    "kind": items[i].participant.kind,
                    "user_id": items[i].participant.user_id,
                    "person": None,
                    "guest": items[i].participant.kind == "guest",
                    "payload": json.dumps({"ideas": items[i].ideas}, ensure_ascii=False),
                    "now": now,
                }
                for i in indexes
            ]
            conn.exec_driver_sql(self._sql["join"], rows)
            conn.exec_driver_sql(self._sql["upsert_answer"], rows)
            last = int(
                conn.exec_driver_sql(
                    self._sql["bump_by"], {"e": evaluation_id, "n": len(indexes)}
                ).scalar_one()
            )
            for offset, index in enumerate(indexes):
                out[index] = last - len(indexes) + 1 + offset
        return out

    @staticmethod
    def _answer_refusal(poll: PollRow | None) -> ContractError | None:
        if poll is None:
            return _not_found()
        if poll.frozen_at is not None:
            return ContractError(ErrorCode.poll_frozen, "This poll is frozen.")
        if poll.closed_at is not None:
            return ContractError(ErrorCode.answer_invalid, "This poll is closed.")
        return None

    @read_only
    def answer(self, conn: Connection, evaluation_id: str, attempt_id: str) -> list[str]:
        """The attempt's stored ideas ([] when none)."""
        row = conn.exec_driver_sql(
            self._sql["answer"], {"e": evaluation_id, "a": attempt_id}
        ).first()
        if row is None:
            return []
        ideas = json.loads(row[0]).get("ideas")
        return [i for i in ideas if isinstance(i, str)] if isinstance(ideas, list) else []

    # --- marks, switches, audit --------------------------------------------------------------

    @transaction
    def write_marks(
        self,
        conn: Connection,
        evaluation_id: str,
        marks: Sequence[IdeaMark],
        actor: str,
        action: str,
        record: dict[str, Any],
        now: float,
    ) -> int:
        """A teacher's marks upserted whole, audited; the new version (409 when frozen)."""
        poll = self._poll_in(conn, evaluation_id)
        if poll is None:
            raise _not_found()
        if poll.frozen_at is not None:
            raise ContractError(ErrorCode.poll_frozen, "This poll is frozen: read-only.")
        for mark in marks:
            conn.exec_driver_sql(self._sql["upsert_mark"], _mark_params(evaluation_id, mark, now))
        self._audit(conn, evaluation_id, actor, action, record, now)
        return self._bump(conn, evaluation_id)

    @transaction
    def write_ai_marks(
        self, conn: Connection, evaluation_id: str, marks: Sequence[IdeaMark], now: float
    ) -> tuple[list[IdeaMark], int | None]:
        """The model's marks, each inserted only where no mark exists; those written, version."""
        written = [
            mark
            for mark in marks
            if conn.exec_driver_sql(
                self._sql["insert_mark"], _mark_params(evaluation_id, mark, now)
            ).rowcount
            == 1
        ]
        return written, (self._bump(conn, evaluation_id) if written else None)

    @transaction
    def set_switches(
        self,
        conn: Connection,
        evaluation_id: str,
        *,
        votes: bool,
        moderation: bool,
        ai: bool,
        retroactive: Sequence[IdeaMark],
        run: str | None,
        actor: str,
        record: dict[str, Any],
        now: float,
    ) -> tuple[list[IdeaMark], int]:
        """The switches, the marks of an AI switched on (`teacherOnly` on every idea there: an
        empty teacher mark inserted where none, only that flag set on one that exists), the run
        reset ("on") or its lease dropped ("off"), audited; the marks written, version."""
        for mark in retroactive:
            conn.exec_driver_sql(self._sql["retro_mark"], _mark_params(evaluation_id, mark, now))
        written = list(retroactive)
        p = {"e": evaluation_id, "now": now}
        if run == "on":
            conn.exec_driver_sql(self._sql["run_ensure"], p)
            rule = lambda r, at: ai_run.switch_on(r, evaluation_id, at)  # noqa: E731
            self._step(conn, "run_switch", evaluation_id, now, rule)
        elif run == "off":
            self._step(conn, "run_switch", evaluation_id, now, ai_run.switch_off)
        self._audit(conn, evaluation_id, actor, "poll.reveal", record, now)
        version = conn.exec_driver_sql(
            self._sql["switches"], {**p, "votes": votes, "moderation": moderation, "ai": ai}
        ).scalar()
        if version is None:
            raise _not_found()
        return written, int(version)

    def _audit(
        self,
        conn: Connection,
        evaluation_id: str,
        actor: str,
        action: str,
        record: dict[str, Any],
        now: float,
    ) -> None:
        conn.exec_driver_sql(
            self._sql["audit"],
            {
                "e": evaluation_id,
                "actor": actor,
                "action": action,
                "record": json.dumps(record, ensure_ascii=False, default=str),
                "now": now,
            },
        )

    @read_only
    def audit(self, conn: Connection, evaluation_id: str) -> list[dict[str, Any]]:
        """The poll's audit records, oldest first."""
        return [
            {"actor": actor, "action": action, "record": json.loads(record), "at": at}
            for actor, action, record, at in conn.exec_driver_sql(
                self._sql["audit_list"], {"e": evaluation_id}
            )
        ]

    # --- the freeze --------------------------------------------------------------------------

    @read_only
    def due_freeze(self, conn: Connection, before: float, limit: int = 100) -> list[str]:
        """Polls closed at or before `before` and not frozen yet."""
        rows = conn.exec_driver_sql(self._sql["due_freeze"], {"before": before, "limit": limit})
        return [str(r[0]) for r in rows]

    @transaction
    def freeze(self, conn: Connection, evaluation_id: str, view: dict[str, Any], now: float) -> int:
        """Keep the view, purge the guests (their answers and attempts); the new version."""
        p = {"e": evaluation_id, "now": now, "view": json.dumps(view, ensure_ascii=False)}
        if conn.exec_driver_sql(self._sql["freeze"], p).rowcount != 1:
            return 0
        conn.exec_driver_sql(self._sql["purge_guest_answers"], {"e": evaluation_id, "yes": True})
        conn.exec_driver_sql(self._sql["purge_guests"], p)
        poll = self._poll_in(conn, evaluation_id)
        return 0 if poll is None else poll.version
