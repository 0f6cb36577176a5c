"""mcq: propose choices `{text, correct}`; fill the empty rows in place, then append (§2).

heig-quiz `packages/qt-mcq/src/generate.ts` (`mergeMcq`, the item wand's `accepts`/`place`):

- a choice is "written" when its text is not blank; a tick on an EMPTY row is not the teacher's
  key, so the fresh draft `[{"",true},{"",false}]` is filled with the proposals' own ticks;
- texts are compared trimmed, lower-cased, spaces collapsed: a proposal repeating a written
  choice, or an earlier proposal, is dropped, and so is a blank one;
- single mode: a proposed key is kept only while no written choice is ticked (the teacher's
  tick wins; a second proposed key becomes a distractor); multiple mode keeps the ticks;
- empty rows are filled in order, an empty row no proposal fills stays as it was, the rest is
  appended while the list is under 12; only `choices` changes; choices have no ids.

Beyond the platform: a draft without `mode` reads as single (the schema's default, where the
platform's merge would read it as multiple), and the item wand never writes a choice that
repeats a written one (the seed's "a choice already written is never repeated").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.questions.common import js_trim, same_text
from quiz_contracts.questions.mcq import MCQ_MAX_CHOICES
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    ItemWand,
    blank_text,
    copy_draft,
    draft_list,
    js_truthy,
    proposal_items,
    proposal_string,
)


class ProposedChoice(BaseModel):
    """One proposed choice."""

    text: str = Field(description="The choice's text (Markdown), in the statement's language.")
    correct: bool = Field(description="true for a right answer, false for a distractor.")


class McqProposal(BaseModel):
    """The choices the draft lacks; never its statement, mode nor settings."""

    choices: list[ProposedChoice]


INSTRUCTIONS = """\
The question is a multiple-choice question. Propose its choices: the right answer or answers, \
and distractors a student who misunderstood would plausibly pick; 4 or 5 choices in all, \
counting the ones the teacher already wrote. `mode: single` means exactly one choice is right; \
`multiple` means any number. Return only choices the draft does not hold yet: never repeat a \
written choice, even reworded, and never contradict the ticks the teacher set on written \
choices. Keep each choice short; Markdown is allowed.\
"""

ITEM_INSTRUCTIONS = """\
Propose ONE new choice for the empty row named in the message: a plausible distractor, or a \
right answer when the key is still incomplete. It must differ from every choice already written.\
"""


def _single(config: Mapping[str, Any]) -> bool:
    # Anything but an explicit "multiple" reads as single: demoting a second key is the safe side.
    return config.get("mode") != "multiple"


def _written(choice: Any) -> bool:
    # A text of another type (garbage in a draft) is neither written nor empty: it is kept.
    text = choice.get("text") if isinstance(choice, dict) else None
    return isinstance(text, str) and bool(js_trim(text))


def _empty_row(choice: Any) -> bool:
    return isinstance(choice, dict) and blank_text(choice.get("text"))


def _read(raw: Any) -> tuple[str, bool] | None:
    """A proposed choice as (trimmed text, correct), None when it is not one."""
    text = proposal_string(raw, "text")
    if text is None or blank_text(text):
        return None
    return js_trim(text), isinstance(raw, Mapping) and raw.get("correct") is True


def merge_mcq_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Fill the empty rows, then append (12 at most); single mode keeps one key."""
    merged = copy_draft(config)
    choices = draft_list(merged, "choices")
    if choices is None:
        return merged  # not a list: the teacher's, kept
    single = _single(merged)
    seen = {same_text(c["text"]) for c in choices if _written(c)}
    fresh: list[tuple[str, bool]] = []
    for raw in proposal_items(proposal, "choices"):
        read = _read(raw)
        if read is None or same_text(read[0]) in seen:
            continue
        seen.add(same_text(read[0]))
        fresh.append(read)
    taken = any(_written(c) and js_truthy(c.get("correct")) for c in choices)

    def take() -> tuple[str, bool] | None:
        nonlocal taken
        if not fresh:
            return None
        text, proposed = fresh.pop(0)
        correct = proposed and not taken if single else proposed
        taken = taken or correct
        return text, correct

    filled: list[Any] = []
    for choice in choices:
        if _empty_row(choice) and (next_choice := take()) is not None:
            filled.append({**choice, "text": next_choice[0], "correct": next_choice[1]})
        else:
            filled.append(choice)
    while len(filled) < MCQ_MAX_CHOICES and (next_choice := take()) is not None:
        filled.append({"text": next_choice[0], "correct": next_choice[1]})
    merged["choices"] = filled
    return merged


def accepts_item(config: Mapping[str, Any], index: int) -> bool:
    """Row `index` exists and is empty."""
    choices = config.get("choices")
    return isinstance(choices, list) and 0 <= index < len(choices) and _empty_row(choices[index])


def place_item(config: dict[str, Any], index: int, item: dict[str, Any]) -> dict[str, Any]:
    """Write the proposed choice into row `index`; single mode never makes a second key."""
    merged = copy_draft(config)
    read = _read(item)
    if read is None or not accepts_item(merged, index):
        return merged
    choices = list(merged["choices"])
    text, proposed = read
    if any(_written(c) and same_text(c["text"]) == same_text(text) for c in choices):
        return merged  # a choice already written is never repeated
    taken = any(
        i != index and _written(c) and js_truthy(c.get("correct")) for i, c in enumerate(choices)
    )
    correct = proposed and not taken if _single(merged) else proposed
    choices[index] = {**choices[index], "text": text, "correct": correct}
    merged["choices"] = choices
    return merged


class McqGenerator(BaseGenerator):
    """The mcq wand, and the wand of one empty choice."""

    type_name = "mcq"
    instructions = INSTRUCTIONS
    proposal_schema = McqProposal
    item = ItemWand(
        instructions=ITEM_INSTRUCTIONS,
        schema=ProposedChoice,
        accepts=accepts_item,
        place=place_item,
        max_index=MCQ_MAX_CHOICES - 1,
    )

    merge = staticmethod(merge_mcq_proposal)
