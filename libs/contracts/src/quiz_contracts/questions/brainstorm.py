"""brainstorm (ADR-071 §1): a poll's prompt for several short ideas. It has no key."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from quiz_contracts.questions.common import QuestionConfig

IDEA_MAX_CHARS = 60


class BrainstormConfig(QuestionConfig):
    """A brainstorm: the prompt and how many ideas a participant may send."""

    max_ideas: int = Field(default=5, ge=1, le=10)


def brainstorm_to_student(config: BrainstormConfig) -> dict[str, Any]:
    """The prompt and max_ideas: the whole config, since there is no key to hide."""
    return {"prompt": config.prompt, "max_ideas": config.max_ideas}


def brainstorm_to_solution(config: BrainstormConfig) -> None:
    """No key, no solution."""
    return None
