"""categorize: sort cards into labelled columns; a card of no column is a distractor."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import (
    TEXT_MAX,
    ItemId,
    QuestionConfig,
    normalized_text,
    unique_ids,
)

CATEGORIZE_MAX_COLUMNS = 6
CATEGORIZE_MAX_CARDS = 40


class CategorizeColumn(WireModel):
    """A column the student sorts into; its label is shown."""

    id: ItemId
    label: str = Field(min_length=1, max_length=200)


class CategorizeCard(WireModel):
    """A card; `column_id` is the key (None: a distractor that belongs to no column)."""

    id: ItemId
    text: str = Field(min_length=1, max_length=TEXT_MAX)
    column_id: ItemId | None = None


class CategorizeConfig(QuestionConfig):
    """A categorization question: 1–6 columns and the cards to sort."""

    columns: list[CategorizeColumn] = Field(min_length=1, max_length=CATEGORIZE_MAX_COLUMNS)
    cards: list[CategorizeCard] = Field(min_length=1, max_length=CATEGORIZE_MAX_CARDS)

    @model_validator(mode="after")
    def _cards_in_columns(self) -> CategorizeConfig:
        unique_ids(self.columns, "columns")
        unique_ids(self.cards, "cards")
        labels = [normalized_text(c.label) for c in self.columns]
        if len(set(labels)) != len(labels):
            raise ValueError("columns: two columns have the same label")
        known = {c.id for c in self.columns}
        if any(card.column_id is not None and card.column_id not in known for card in self.cards):
            raise ValueError("cards: a card names a column that does not exist")
        texts = [normalized_text(c.text) for c in self.cards]
        if len(set(texts)) != len(texts):
            raise ValueError("cards: two cards have the same text")
        return self


def categorize_to_student(config: CategorizeConfig) -> dict[str, Any]:
    """Columns and cards without placement; cards sorted by text so their order tells nothing."""
    cards = sorted(config.cards, key=lambda c: (normalized_text(c.text), c.id))
    return {
        "prompt": config.prompt,
        "columns": [{"id": c.id, "label": c.label} for c in config.columns],
        "cards": [{"id": c.id, "text": c.text} for c in cards],
    }


def categorize_to_solution(config: CategorizeConfig) -> dict[str, Any]:
    """Where each card belongs (None: a distractor)."""
    return {"placements": {c.id: c.column_id for c in config.cards}}
