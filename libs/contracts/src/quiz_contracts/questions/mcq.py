"""mcq: a statement and 2–12 choices, one right (single) or at least one right (multiple)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import TEXT_MAX, ItemId, QuestionConfig, unique_ids

MCQ_MAX_CHOICES = 12


class McqChoice(WireModel):
    """One choice; `correct` is the key and never reaches a student."""

    id: ItemId
    text: str = Field(min_length=1, max_length=TEXT_MAX, description="Markdown; may hold [[…]].")
    correct: bool = False


class McqConfig(QuestionConfig):
    """A multiple-choice question. Takes [[…]] parameters (ADR-056)."""

    mode: Literal["single", "multiple"] = Field(
        default="single", description="single: exactly one right choice; multiple: one or more."
    )
    shuffle: bool = Field(default=True, description="Shuffle the choices per student.")
    choices: list[McqChoice] = Field(min_length=2, max_length=MCQ_MAX_CHOICES)

    @model_validator(mode="after")
    def _key_matches_mode(self) -> McqConfig:
        unique_ids(self.choices, "choices")
        right = sum(1 for c in self.choices if c.correct)
        if self.mode == "single" and right != 1:
            raise ValueError("choices: single mode needs exactly one right choice")
        if self.mode == "multiple" and right < 1:
            raise ValueError("choices: multiple mode needs at least one right choice")
        if len({" ".join(c.text.split()).casefold() for c in self.choices}) != len(self.choices):
            raise ValueError("choices: two choices have the same text")
        return self


def mcq_to_student(config: McqConfig) -> dict[str, Any]:
    """The statement, the mode (radio or boxes) and the choices without their ticks."""
    return {
        "prompt": config.prompt,
        "mode": config.mode,
        "shuffle": config.shuffle,
        "choices": [{"id": c.id, "text": c.text} for c in config.choices],
    }


def mcq_to_solution(config: McqConfig) -> dict[str, Any]:
    """The ids of the right choices."""
    return {"correct": [c.id for c in config.choices if c.correct]}
