"""The repository by table: each table's class brings its own statements, gathered once by the
shared base; a name two tables both claim is refused when the repository is built."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from quiz_poll.repository import PollRepository
from quiz_poll.repository.ai_runs import AiRunSteps
from quiz_poll.repository.answers import AnswerTables
from quiz_poll.repository.base import RepositoryBase
from quiz_poll.repository.marks import MarkTables
from quiz_servicekit.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'poll.db'}", threads=1)
    yield database
    database.close()


def test_the_repository_holds_every_table_statement(db: Database) -> None:
    repo = PollRepository(db)
    tables = (RepositoryBase, AnswerTables, MarkTables, AiRunSteps, PollRepository)
    by_table = [set(cls.SQL) for cls in tables]
    assert set(repo._sql) == set().union(*by_table)
    # Disjoint: a statement belongs to one table's class.
    assert sum(len(names) for names in by_table) == len(repo._sql)
    # The poll lease's statements are the AI run's, the answers' the answers' table's.
    assert {"run_claim", "run_end", "run_locked"} <= set(AiRunSteps.SQL)
    assert {"join", "upsert_answer"} <= set(AnswerTables.SQL)


def test_a_statement_named_by_two_tables_is_refused(db: Database) -> None:
    class Shadowing(AnswerTables):
        SQL: ClassVar[dict[str, str]] = {"join": "SELECT 1"}

    with pytest.raises(TypeError, match="join"):
        Shadowing(db)
