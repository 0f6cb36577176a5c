"""rich: a long written answer, graded by a person against a model answer and a rubric."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from quiz_contracts.questions.common import QuestionConfig

RICH_TEXT_MAX = 20_000


class RichConfig(QuestionConfig):
    """A free-text question. `reference` and `rubric` are the grader's (invariant 4)."""

    reference: str = Field(default="", max_length=RICH_TEXT_MAX, description="Model answer.")
    rubric: str = Field(default="", max_length=RICH_TEXT_MAX, description="How to grade, markdown.")
    max_words: int | None = Field(default=None, ge=1, le=20_000, description="A setting.")


def rich_to_student(config: RichConfig) -> dict[str, Any]:
    """The statement and the length limit."""
    return {"prompt": config.prompt, "max_words": config.max_words}


def rich_to_solution(config: RichConfig) -> dict[str, Any]:
    """The model answer and the rubric."""
    return {"reference": config.reference, "rubric": config.rubric}
