"""The shared base of poll's tables: the database, every table's statements, the poll row.

Each table's class (`answers.py`, `marks.py`, `ai_runs.py`, `polls.py`) declares its own `SQL`
(name → statement, written for both dialects); the base gathers those of the classes the
repository is made of, once, when it is built. Every change a room can see bumps
`polls.version` in its transaction (`_bump`): that number is the live frames' `seq`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from sqlalchemy import Connection

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import MaskedPerson
from quiz_poll.repository.rows import PollRow
from quiz_servicekit.db import Database


class RepositoryBase:
    """The database and the statements of every table class mixed into the repository."""

    SQL: ClassVar[dict[str, str]] = {
        "poll": (
            "SELECT evaluation_id, again_of, teacher_id, anonymous, classroom_id, prompt,"
            " max_ideas, roster, votes, moderation, ai, version, opened_at, closed_at, frozen_at,"
            " frozen_view"
            " FROM polls WHERE evaluation_id = :e"
        ),
        "bump": "UPDATE polls SET version = version + 1 WHERE evaluation_id = :e RETURNING version",
        "bump_by": (
            "UPDATE polls SET version = version + :n WHERE evaluation_id = :e RETURNING version"
        ),
    }

    def __init__(self, db: Database) -> None:
        self.db = db
        statements: dict[str, str] = {}
        for cls in reversed(type(self).__mro__):
            own = cls.__dict__.get("SQL", {})
            if clash := statements.keys() & own.keys():
                raise TypeError(f"{cls.__name__}: statements named twice: {sorted(clash)}")
            statements.update(own)
        self._sql = {name: db.sql(statement) for name, statement in statements.items()}

    def _poll_in(self, conn: Connection, evaluation_id: str) -> PollRow | None:
        row = conn.exec_driver_sql(self._sql["poll"], {"e": evaluation_id}).first()
        return None if row is None else _poll(row)

    def _bump(self, conn: Connection, evaluation_id: str) -> int:
        version = conn.exec_driver_sql(self._sql["bump"], {"e": evaluation_id}).scalar()
        if version is None:
            raise not_found()
        return int(version)


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


def not_found() -> ContractError:
    return ContractError(ErrorCode.not_found, "poll not found")
