"""rich: an essay, graded by a person against a model answer and a rubric (the grader's).

heig-quiz `packages/qt-rich/src/schema.ts` (RICH_CONFIG_VERSION 1) and `server.ts`. The limit is
in characters (UTF-16 units, markdown marks included), never in words.

Draft:

    {"configVersion": 1, "prompt": "Expliquez la photosynthèse.", "rubric": "",
     "format": "markdown", "maxChars": 3000}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    PlatformModel,
    Prompt,
    StudentView,
    Utf16,
    int_in,
)

RICH_CONFIG_VERSION = 1
# The hard cap of an answer and of the model answer: about seventeen A4 pages.
RICH_MAX_CHARS = 50_000
RICH_RUBRIC_MAX = 20_000


class RichConfig(PlatformModel):
    """An essay question. `reference` and `rubric` are the grader's (invariant 4)."""

    config_version: Literal[1]
    prompt: Prompt
    rubric: Annotated[str, Utf16(0, RICH_RUBRIC_MAX)] = ""
    reference: Annotated[str, Utf16(0, RICH_MAX_CHARS)] | None = None
    max_chars: Annotated[int, int_in(1, RICH_MAX_CHARS)] | None = None
    format: Literal["markdown", "plain"] = "markdown"


def empty_rich_draft() -> dict[str, Any]:
    """`emptyRichDraft()`."""
    return {"configVersion": RICH_CONFIG_VERSION, "prompt": "", "rubric": "", "format": "markdown"}


def rich_to_student(config: RichConfig, view: StudentView) -> dict[str, Any]:
    """The prompt, the field's format and its limit; the rubric and model answer stay home."""
    student: dict[str, Any] = {"prompt": config.prompt, "format": config.format}
    if config.max_chars is not None:
        student["maxChars"] = config.max_chars
    return student


def rich_to_solution(config: RichConfig) -> dict[str, Any]:
    """`{rubric, reference?}`: the grader's guide."""
    solution: dict[str, Any] = {"rubric": config.rubric}
    if config.reference is not None:
        solution["reference"] = config.reference
    return solution


RICH_BUDGET = DraftBudget(text=PROMPT_MAX + RICH_RUBRIC_MAX + RICH_MAX_CHARS + 1_024, values=32)
