"""categorize: propose columns with their cards, and distractors (ADR-059 §2).

heig-quiz `packages/qt-categorize/src/generate.ts` (`mergeCategorize`). The key is each column's
list of card ids; a card in no column is a distractor. For each proposed column (label trimmed
and cut to 200; a blank label skips it), the target is:

1. the first column not yet claimed in this merge whose label is the same (trimmed,
   lower-cased, spaces collapsed) — the teacher's spelling stays;
2. else the first unclaimed column with no label, which takes the proposed label;
3. else a new column, while there are fewer than 6;
4. else nothing: the column and its cards are dropped.

Each draft column is claimed at most once, so a second proposed column with the same label makes
a NEW column. A card (trimmed, cut to 500) is dropped when blank, when the draft or an earlier
proposal holds it (same comparison), or at 30 cards; a card the draft holds is never moved.
Distractors come last. Ids are the merge's: 8 random base-36 characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.questions.categorize import (
    CATEGORIZE_CARD_MAX,
    CATEGORIZE_LABEL_MAX,
    CATEGORIZE_MAX_CARDS,
    CATEGORIZE_MAX_COLUMNS,
    new_id,
)
from quiz_contracts.questions.common import same_text
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    blank_text,
    copy_draft,
    draft_list,
    proposal_items,
    proposal_string,
    text_of,
    trimmed_cut,
)


class ProposedColumn(BaseModel):
    """A column by its label, with the cards that belong in it."""

    label: str = Field(description="The column's label; reuse a label of the draft to add to it.")
    cards: list[str] = Field(description="The cards (short texts) that belong in this column.")


class CategorizeProposal(BaseModel):
    """Columns with their cards, and distractor cards that belong in no column."""

    columns: list[ProposedColumn]
    distractors: list[str] = Field(description="Cards that belong in no column.")


INSTRUCTIONS = """\
The question asks the student to sort cards into columns (categories). Propose `columns`, each \
with its `label` and the `cards` (short texts) that belong in it, and a few `distractors`: cards \
that belong in no column. Keep the labels of the columns the teacher already named, and name \
the unnamed ones. Between 2 and 6 columns, at most 30 cards in all, each card a few words. \
Never repeat a card the draft holds, and never contradict where the teacher placed one.\
"""


def merge_categorize_proposal(
    config: dict[str, Any],
    proposal: dict[str, Any],
    new_id: Callable[[], str] = new_id,
) -> dict[str, Any]:
    """Join columns by label (each claimed once), else an unlabelled one, else add; new cards."""
    merged = copy_draft(config)
    columns = draft_list(merged, "columns")
    cards = draft_list(merged, "cards")
    if columns is None or cards is None:
        return merged  # not lists: the teacher's, kept
    columns, cards = list(columns), list(cards)
    known = {same_text(text_of(c, "text")) for c in cards}
    ids = {
        c["id"] for c in [*columns, *cards] if isinstance(c, dict) and isinstance(c.get("id"), str)
    }
    claimed: set[int] = set()

    def fresh_id() -> str:
        while (candidate := new_id()) in ids:
            pass
        ids.add(candidate)
        return candidate

    def add_card(raw: Any) -> str | None:
        """A new card's id, unless it is blank, already held, or the 30 are reached."""
        text = trimmed_cut(raw, CATEGORIZE_CARD_MAX) if isinstance(raw, str) else ""
        if not text or same_text(text) in known or len(cards) >= CATEGORIZE_MAX_CARDS:
            return None
        known.add(same_text(text))
        card = {"id": fresh_id(), "text": text}
        cards.append(card)
        return card["id"]

    def target_for(label: str) -> int | None:
        open_columns = [i for i, c in enumerate(columns) if _usable(c) and i not in claimed]
        for i in open_columns:
            if same_text(text_of(columns[i], "label")) == same_text(label):
                return i
        for i in open_columns:
            if blank_text(columns[i].get("label")):
                columns[i]["label"] = label
                return i
        if len(columns) < CATEGORIZE_MAX_COLUMNS:
            columns.append({"id": fresh_id(), "label": label, "cards": []})
            return len(columns) - 1
        return None

    for proposed in proposal_items(proposal, "columns"):
        label = trimmed_cut(proposal_string(proposed, "label") or "", CATEGORIZE_LABEL_MAX)
        if not label:
            continue
        target = target_for(label)
        if target is None:
            continue
        claimed.add(target)
        column = columns[target]
        if column.get("cards") is None:
            column["cards"] = []
        for text in proposal_items(proposed, "cards"):
            card_id = add_card(text)
            if card_id is not None:
                column["cards"].append(card_id)
    for text in proposal_items(proposal, "distractors"):
        add_card(text)
    merged["columns"] = columns
    merged["cards"] = cards
    return merged


def _usable(column: Any) -> bool:
    """A draft column the merge may write into: an object whose `cards` is a list or absent."""
    return isinstance(column, dict) and (
        column.get("cards") is None or isinstance(column["cards"], list)
    )


class CategorizeGenerator(BaseGenerator):
    """The sorting wand."""

    type_name = "categorize"
    instructions = INSTRUCTIONS
    proposal_schema = CategorizeProposal

    merge = staticmethod(merge_categorize_proposal)
