"""The marks on a poll's ideas (`poll_idea_marks`) and its audit (`poll_audit`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy import Connection

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark
from quiz_poll.repository.base import RepositoryBase, not_found
from quiz_servicekit.db import read_only, transaction


def mark_params(evaluation_id: str, mark: IdeaMark, now: float) -> dict[str, Any]:
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


class MarkTables(RepositoryBase):
    """A teacher's marks (upserted whole, audited), the model's (only where none), the audit."""

    SQL: ClassVar[dict[str, str]] = {
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
    }

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
            raise not_found()
        if poll.frozen_at is not None:
            raise ContractError(ErrorCode.poll_frozen, "This poll is frozen: read-only.")
        for mark in marks:
            conn.exec_driver_sql(self._sql["upsert_mark"], mark_params(evaluation_id, mark, now))
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
                self._sql["insert_mark"], mark_params(evaluation_id, mark, now)
            ).rowcount
            == 1
        ]
        return written, (self._bump(conn, evaluation_id) if written else None)

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
