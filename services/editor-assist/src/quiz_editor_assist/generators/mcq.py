"""mcq: propose choices and which are right; fill empty rows, then append (ADR-059 §2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.questions.common import TEXT_MAX, normalized_text
from quiz_contracts.questions.mcq import MCQ_MAX_CHOICES
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    ItemCall,
    Proposal,
    copy_draft,
    draft_list,
    is_placeholder,
    next_id,
    proposal_items,
    proposal_text,
    taken_ids,
)


class ProposedChoice(BaseModel):
    """One proposed choice."""

    text: str = Field(description="The choice's text, in the statement's language.")
    correct: bool = Field(description="True for a right answer, false for a distractor.")


class McqProposal(Proposal):
    """Choices to complete the question with; never its statement, mode nor ids."""

    choices: list[ProposedChoice] = Field(default_factory=list, max_length=MCQ_MAX_CHOICES)


class McqItemProposal(BaseModel):
    """ONE choice for one empty row."""

    text: str = Field(description="The choice's text, in the statement's language.")
    correct: bool = Field(description="True for a right answer, false for a distractor.")


INSTRUCTIONS = """\
Propose the choices of this multiple-choice question: the right answer(s) and plausible \
distractors, 4 to 6 choices in all counting the ones already written. `mode` says whether one \
choice (single) or several (multiple) are right. Never repeat a choice already written, even \
reworded. Keep choices short, parallel in form, and free of hints such as "all of the above".\
"""

ITEM_INSTRUCTIONS = """\
Propose ONE new choice for the empty row named in the message: a right answer if the question \
still lacks one, otherwise a plausible distractor different from every choice already written.\
"""


def _mode(config: Mapping[str, Any]) -> str:
    # A garbage mode reads as single: demoting a second key is the safe side.
    return "multiple" if config.get("mode") == "multiple" else "single"


def _written_texts(choices: list[Any]) -> set[str]:
    return {
        normalized_text(c["text"])
        for c in choices
        if isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"].strip()
    }


def _has_key(choices: list[Any]) -> bool:
    return any(isinstance(c, dict) and c.get("correct") is True for c in choices)


def _read_choice(raw: Any) -> tuple[str, bool] | None:
    """A proposed choice as (text, correct), or None when it is not one."""
    text = proposal_text(raw, "text", TEXT_MAX)
    if not text:
        return None
    return text, isinstance(raw, Mapping) and raw.get("correct") is True


def _place(choices: list[Any], row: int | None, text: str, correct: bool, taken: set[str]) -> None:
    """Write a choice into a placeholder row (keeping its id) or append a new one."""
    if row is not None:
        filled = dict(choices[row])
        filled["text"] = text
        filled["correct"] = correct
        if not isinstance(filled.get("id"), str) or not filled["id"]:
            filled["id"] = _fresh_id(taken)
        choices[row] = filled
    else:
        choices.append({"id": _fresh_id(taken), "text": text, "correct": correct})


def _fresh_id(taken: set[str]) -> str:
    return next_id("c", taken)


def merge_mcq_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Fill the empty rows in place, then append, 12 at most; single mode keeps one key."""
    merged = copy_draft(config)
    choices = draft_list(merged, "choices")
    if choices is None:
        return merged
    choices = list(choices)
    single = _mode(merged) == "single"
    written = _written_texts(choices)
    keyed = _has_key(choices)
    taken = taken_ids(choices)
    empty_rows = [i for i, c in enumerate(choices) if is_placeholder(c)]
    for raw in proposal_items(proposal, "choices"):
        read = _read_choice(raw)
        if read is None:
            continue
        text, correct = read
        if normalized_text(text) in written:
            continue
        if single and correct and keyed:
            correct = False  # the teacher's tick (or the first proposed key) wins
        row = empty_rows.pop(0) if empty_rows else None
        if row is None and len(choices) >= MCQ_MAX_CHOICES:
            break
        _place(choices, row, text, correct, taken)
        written.add(normalized_text(text))
        keyed = keyed or correct
    merged["choices"] = choices
    return merged


class McqGenerator(BaseGenerator):
    """The mcq wand, and the wand of one empty choice."""

    type_name = "mcq"
    instructions = INSTRUCTIONS
    proposal_schema = McqProposal

    merge = staticmethod(merge_mcq_proposal)

    def item(self, config: Mapping[str, Any], index: int) -> ItemCall:
        """One empty choice row; any other index is item_not_empty."""
        choices = config.get("choices")
        if (
            not isinstance(choices, list)
            or not 0 <= index < len(choices)
            or not is_placeholder(choices[index])
        ):
            raise ContractError(ErrorCode.item_not_empty, f"choice {index} is not an empty row")

        def merge_item(draft: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
            merged = copy_draft(draft)
            rows = draft_list(merged, "choices")
            read = _read_choice(proposal)
            if rows is None or read is None or not 0 <= index < len(rows):
                return merged
            if not is_placeholder(rows[index]):
                return merged
            text, correct = read
            if normalized_text(text) in _written_texts(rows):
                return merged
            if _mode(merged) == "single" and _has_key(rows):
                correct = False
            rows = list(rows)
            _place(rows, index, text, correct, taken_ids(rows))
            merged["choices"] = rows
            return merged

        return ItemCall(schema=McqItemProposal, merge=merge_item, instructions=ITEM_INSTRUCTIONS)
