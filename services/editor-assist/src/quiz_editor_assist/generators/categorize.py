"""categorize: propose columns and their cards, plus distractors (ADR-059 §2).

A proposed column joins the teacher's column of the same label, else takes an unlabelled one,
else is added (6 at most). A card whose text the draft holds is never added again nor moved.
Ids are the merge's: the model never names one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.questions.categorize import CATEGORIZE_MAX_CARDS, CATEGORIZE_MAX_COLUMNS
from quiz_contracts.questions.common import TEXT_MAX, normalized_text
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    Proposal,
    copy_draft,
    draft_list,
    is_placeholder,
    next_id,
    proposal_items,
    proposal_text,
    taken_ids,
)


class ProposedColumn(BaseModel):
    """A column by its label, with the cards that belong in it."""

    label: str = Field(description="The column's label; reuse a label of the draft to add to it.")
    cards: list[str] = Field(default_factory=list, description="Texts of the cards it takes.")


class CategorizeProposal(Proposal):
    """Columns with their cards, and distractor cards that belong to no column."""

    columns: list[ProposedColumn] = Field(default_factory=list, max_length=CATEGORIZE_MAX_COLUMNS)
    distractors: list[str] = Field(
        default_factory=list, description="Cards that belong to no column."
    )


INSTRUCTIONS = """\
Propose the columns of this sorting question, each with the cards that belong in it, and a few \
distractor cards that belong to no column. To add cards to a column already in the draft, use \
its label exactly. 2 to 4 columns and 3 to 5 cards per column in all, counting what is written. \
Never repeat a card already in the draft: a card is sorted into one column only.\
"""


def _label_of(column: Any) -> str:
    if isinstance(column, dict) and isinstance(column.get("label"), str):
        return normalized_text(column["label"])
    return ""


def merge_categorize_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Join columns by label, else an unlabelled one, else add; append only new cards."""
    merged = copy_draft(config)
    columns = draft_list(merged, "columns")
    cards = draft_list(merged, "cards")
    if columns is None or cards is None:
        return merged
    columns, cards = list(columns), list(cards)
    column_ids = taken_ids(columns)
    card_ids = taken_ids(cards)
    held = {
        normalized_text(c["text"])
        for c in cards
        if isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"].strip()
    }
    empty_cards = [i for i, c in enumerate(cards) if is_placeholder(c)]

    def add_card(text: str, column_id: str | None) -> None:
        key = normalized_text(text)
        if not key or key in held:
            return
        card = {"text": text, "column_id": column_id}
        if empty_cards:
            row = empty_cards.pop(0)
            card = {**cards[row], **card}
            if not isinstance(card.get("id"), str) or not card["id"]:
                card["id"] = next_id("k", card_ids)
            cards[row] = card
        elif len(cards) < CATEGORIZE_MAX_CARDS:
            cards.append({"id": next_id("k", card_ids), **card})
        else:
            return
        held.add(key)

    def column_for(label: str) -> str | None:
        """The id of the column that takes `label`; None when there is no room."""
        key = normalized_text(label)
        for column in columns:
            if _label_of(column) == key and isinstance(column.get("id"), str):
                return str(column["id"])
        for i, column in enumerate(columns):
            if is_placeholder(column):
                # Fill an unlabelled column in place, keeping the id its cards may already name.
                filled = {**column, "label": label}
                if not isinstance(filled.get("id"), str) or not filled["id"]:
                    filled["id"] = next_id("col", column_ids)
                columns[i] = filled
                return str(filled["id"])
        if len(columns) >= CATEGORIZE_MAX_COLUMNS:
            return None
        new = {"id": next_id("col", column_ids), "label": label}
        columns.append(new)
        return new["id"]

    for raw in proposal_items(proposal, "columns"):
        label = proposal_text(raw, "label", 200)
        if not label:
            continue
        column_id = column_for(label)
        if column_id is None:
            continue
        for text in proposal_items(raw, "cards"):
            if isinstance(text, str) and len(text.strip()) <= TEXT_MAX:
                add_card(text.strip(), column_id)
    for text in proposal_items(proposal, "distractors"):
        if isinstance(text, str) and len(text.strip()) <= TEXT_MAX:
            add_card(text.strip(), None)
    # Write a list back only when it changed, so an absent or null one stays as it was.
    if columns != draft_list(merged, "columns"):
        merged["columns"] = columns
    if cards != draft_list(merged, "cards"):
        merged["cards"] = cards
    return merged


class CategorizeGenerator(BaseGenerator):
    """The categorization wand."""

    type_name = "categorize"
    instructions = INSTRUCTIONS
    proposal_schema = CategorizeProposal

    merge = staticmethod(merge_categorize_proposal)
