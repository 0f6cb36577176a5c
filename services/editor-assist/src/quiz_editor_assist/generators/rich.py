"""rich: propose the model answer and the rubric, written only where empty (ADR-059 §2)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from quiz_contracts.questions.rich import RICH_TEXT_MAX
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    Proposal,
    copy_draft,
    is_blank_field,
    proposal_text,
)


class RichProposal(Proposal):
    """The grader's texts."""

    reference: str = Field(default="", description="A model answer, as a good student writes it.")
    rubric: str = Field(
        default="", description="How to grade: the points expected and what each is worth."
    )


INSTRUCTIONS = """\
Propose, for this open question graded by a teacher, a model answer (`reference`) of the length \
and level the statement asks for, and a grading rubric (`rubric`): a short markdown list of the \
points expected, each with what it is worth. Leave a field empty when the draft already has it.\
"""


def merge_rich_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Write the reference and the rubric only where the draft's are empty."""
    merged = copy_draft(config)
    for key in ("reference", "rubric"):
        proposed = proposal_text(proposal, key, RICH_TEXT_MAX)
        if proposed and is_blank_field(merged, key):
            merged[key] = proposed
    return merged


class RichGenerator(BaseGenerator):
    """The free-text wand."""

    type_name = "rich"
    instructions = INSTRUCTIONS
    proposal_schema = RichProposal

    merge = staticmethod(merge_rich_proposal)
