"""Every SQL statement of poll, by table: polls, participants and answers, marks and the audit,
the AI lease — each table's class on one shared base (`base.RepositoryBase`), composed into
`PollRepository`.

Each operation is one transaction on servicekit's `Database`. Every change a room can see bumps
`polls.version` in the same transaction: that number is the live frames' `seq`, so replicas and
restarts agree on it. The AI lease is claimed, beaten, and released by conditional UPDATEs
(`poll_ai_runs`, ADR-072 §12): two replicas never both hold it.
"""

from quiz_poll.repository.polls import PollRepository
from quiz_poll.repository.rows import (
    AiRunRow,
    AnswerToSave,
    Joined,
    NewPoll,
    PollRow,
    PollState,
)

__all__ = [
    "AiRunRow",
    "AnswerToSave",
    "Joined",
    "NewPoll",
    "PollRepository",
    "PollRow",
    "PollState",
]
