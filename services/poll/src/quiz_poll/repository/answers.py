"""Who joined a poll (`poll_participants`) and their answers (`poll_answers`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from sqlalchemy import Connection

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import MaskedPerson, PollParticipant
from quiz_poll.repository.base import RepositoryBase, not_found
from quiz_poll.repository.rows import AnswerToSave, PollRow
from quiz_servicekit.db import read_only, transaction


class AnswerTables(RepositoryBase):
    """Joining, an attempt's whole answer (one, or many in one transaction), reading it back."""

    SQL: ClassVar[dict[str, str]] = {
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
    }

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
            raise not_found()
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
            return not_found()
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
