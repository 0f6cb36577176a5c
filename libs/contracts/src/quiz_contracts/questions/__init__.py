"""Question types shared by every service: config models, keys and student views."""

from quiz_contracts.questions.common import Problem
from quiz_contracts.questions.registry import (
    QUESTION_TYPES,
    STAFF_ONLY_KEYS,
    DraftReading,
    QuestionType,
    question_type,
    read_draft,
)

__all__ = [
    "QUESTION_TYPES",
    "STAFF_ONLY_KEYS",
    "DraftReading",
    "Problem",
    "QuestionType",
    "question_type",
    "read_draft",
]
