"""rich: propose a model answer and a rubric, each written only where the field is blank (§2).

heig-quiz `packages/qt-rich/src/generate.ts` (`mergeRich`): both proposals are trimmed; an
over-long one is cut, not dropped (the reference to 50,000 characters, the rubric to 20,000).
Both are the grader's: the student view never carries them (invariant 4).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.questions.rich import RICH_MAX_CHARS, RICH_RUBRIC_MAX
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    copy_draft,
    proposal_string,
    trimmed_cut,
    writable,
)


class RichProposal(BaseModel):
    """The grader's texts, in Markdown."""

    reference: str = Field(description="A model answer of the length and level asked for.")
    rubric: str = Field(description="The points that earn marks, each with its share.")


INSTRUCTIONS = """\
The question is an essay, graded by hand. Propose, in Markdown: `reference`, a model answer of \
the length and level the statement asks for (within `maxChars` when it is set); and `rubric`, \
the criteria a grader reads beside each answer: a short list of the points that earn marks, \
each with its share, and the common mistakes that lose them. A field the draft already fills \
is kept as the teacher wrote it: leave its proposal empty.\
"""

LIMITS = {"reference": RICH_MAX_CHARS, "rubric": RICH_RUBRIC_MAX}


def merge_rich_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Write the reference and the rubric only where the draft's are blank."""
    merged = copy_draft(config)
    for key, limit in LIMITS.items():
        proposed = trimmed_cut(proposal_string(proposal, key) or "", limit)
        if proposed and writable(merged, key):
            merged[key] = proposed
    return merged


class RichGenerator(BaseGenerator):
    """The essay wand."""

    type_name = "rich"
    instructions = INSTRUCTIONS
    proposal_schema = RichProposal

    merge = staticmethod(merge_rich_proposal)
