"""The polls (`polls`): opening, the state a replica serves, the End, the switches, the freeze;
and `PollRepository`, every table of poll on one base.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy import Connection

from quiz_contracts.poll import IdeaMark, MaskedPerson, PollParticipant
from quiz_poll.domain import ai_run
from quiz_poll.repository.ai_runs import AiRunSteps
from quiz_poll.repository.answers import AnswerTables
from quiz_poll.repository.base import not_found
from quiz_poll.repository.marks import MarkTables, mark_params
from quiz_poll.repository.rows import Joined, NewPoll, PollRow, PollState
from quiz_servicekit.db import read_only, transaction


class PollRepository(AnswerTables, MarkTables, AiRunSteps):
    """Every table of poll (see the package docstring): the polls' own operations here, the
    participants' and answers', the marks' and audit's, and the AI run's from their classes."""

    SQL: ClassVar[dict[str, str]] = {
        "insert_poll": (
            "INSERT INTO polls (evaluation_id, again_of, teacher_id, anonymous, classroom_id,"
            " prompt, max_ideas, roster, votes, moderation, ai, version, opened_at)"
            " VALUES (:e, :again_of, :teacher_id, :anonymous, :classroom_id, :prompt, :max_ideas,"
            " :roster, :votes, :moderation, :ai, 1, :now) ON CONFLICT (evaluation_id) DO NOTHING"
        ),
        "close": (
            "UPDATE polls SET closed_at = :at, version = version + 1"
            " WHERE evaluation_id = :e AND closed_at IS NULL"
        ),
        "switches": (
            "UPDATE polls SET votes = :votes, moderation = :moderation, ai = :ai,"
            " version = version + 1 WHERE evaluation_id = :e RETURNING version"
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
        "purge_guests": (
            "DELETE FROM poll_participants WHERE evaluation_id = :e AND kind = 'guest'"
        ),
    }

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
            raise not_found()
        return poll

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
            conn.exec_driver_sql(self._sql["retro_mark"], mark_params(evaluation_id, mark, now))
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
            raise not_found()
        return written, int(version)

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
