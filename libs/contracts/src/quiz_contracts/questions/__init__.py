"""Question types in the platform's own wire shapes: configs, fresh drafts, student views."""

from quiz_contracts.questions.common import Problem, StudentView
from quiz_contracts.questions.registry import (
    QUESTION_TYPES,
    STAFF_ONLY_KEYS,
    DraftReading,
    QuestionType,
    check_draft_size,
    question_type,
    read_draft,
)

__all__ = [
    "QUESTION_TYPES",
    "STAFF_ONLY_KEYS",
    "DraftReading",
    "Problem",
    "QuestionType",
    "StudentView",
    "check_draft_size",
    "question_type",
    "read_draft",
]
