"""categorize: sort cards into 2–6 labelled columns; the key is each column's list of card ids.

heig-quiz `packages/qt-categorize/src/schema.ts` (CATEGORIZE_CONFIG_VERSION 1) and `server.ts`.
A card listed by no column is a distractor, to be left in the tray. Every id is opaque (8
base-36 characters when minted, `^[a-z0-9]{4,40}$` when read): the student sees them.

Draft:

    {"configVersion": 1, "prompt": "Triez les animaux.", "ordered": false,
     "shuffleCards": true, "shuffleColumns": false, "policy": "inherit",
     "columns": [{"id": "k3v9q2xa", "label": "Mammifères", "cards": ["c0a81f2b"]},
                 {"id": "p0w7e4rt", "label": "", "cards": []}],
     "cards": [{"id": "c0a81f2b", "text": "Chat"}]}
"""

from __future__ import annotations

import secrets
import string
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    PlatformModel,
    Prompt,
    StudentView,
    Utf16,
    refuse,
)
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed

CATEGORIZE_CONFIG_VERSION = 1
CATEGORIZE_MIN_COLUMNS = 2
CATEGORIZE_MAX_COLUMNS = 6
CATEGORIZE_MAX_CARDS = 30
CATEGORIZE_CARD_MAX = 500
CATEGORIZE_LABEL_MAX = 200
CATEGORIZE_ID_PATTERN = r"^[a-z0-9]{4,40}$"
# @quiz/domain/categorizeScore.
CATEGORIZE_POLICIES = ("per_item", "all_or_nothing")

CategorizeId = Annotated[str, Utf16(pattern=CATEGORIZE_ID_PATTERN)]
_ID_ALPHABET = string.digits + string.ascii_lowercase


def new_id() -> str:
    """A fresh opaque id: eight base-36 characters (`newId`, qt-categorize/src/schema.ts)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


class CategorizeCard(PlatformModel):
    """A card: short markdown, a word, an expression, a line or two of code."""

    id: CategorizeId
    text: Annotated[str, Utf16(1, CATEGORIZE_CARD_MAX)]


class CategorizeColumn(PlatformModel):
    """A column; `cards` is the KEY: the ids of the cards that belong here, in order."""

    id: CategorizeId
    label: Annotated[str, Utf16(1, CATEGORIZE_LABEL_MAX)]
    cards: Annotated[list[CategorizeId], Field(max_length=CATEGORIZE_MAX_CARDS)] = []


class CategorizeConfig(PlatformModel):
    """A sorting question."""

    config_version: Literal[1]
    prompt: Prompt
    columns: Annotated[
        list[CategorizeColumn],
        Field(min_length=CATEGORIZE_MIN_COLUMNS, max_length=CATEGORIZE_MAX_COLUMNS),
    ]
    cards: Annotated[list[CategorizeCard], Field(min_length=1, max_length=CATEGORIZE_MAX_CARDS)]
    ordered: bool = False
    shuffle_cards: bool = True
    shuffle_columns: bool = False
    policy: Literal["inherit", "per_item", "all_or_nothing"] = "inherit"

    @model_validator(mode="after")
    def _key_rules(self) -> CategorizeConfig:
        # Every issue is reported under `columns`, where the editor shows the board.
        issues: list[Issue] = []
        column_ids = [c.id for c in self.columns]
        card_ids = [c.id for c in self.cards]
        if len(set(column_ids)) != len(column_ids) or len(set(card_ids)) != len(card_ids):
            issues.append(Issue(("columns",), "categorize.duplicate_id"))
        known = set(card_ids)
        if any(card not in known for column in self.columns for card in column.cards):
            issues.append(Issue(("columns",), "categorize.unknown_card"))
        placed = [card for column in self.columns for card in column.cards]
        if len(set(placed)) != len(placed):
            issues.append(Issue(("columns",), "categorize.card_twice"))
        if not placed:
            issues.append(Issue(("columns",), "categorize.no_target"))
        refuse(issues)
        return self


def empty_categorize_draft() -> dict[str, Any]:
    """`emptyCategorizeDraft()`: two unlabelled columns with fresh ids, no card."""
    return {
        "configVersion": CATEGORIZE_CONFIG_VERSION,
        "prompt": "",
        "columns": [
            {"id": new_id(), "label": "", "cards": []},
            {"id": new_id(), "label": "", "cards": []},
        ],
        "cards": [],
        "ordered": False,
        "shuffleCards": True,
        "shuffleColumns": False,
        "policy": "inherit",
    }


def _display(items: list[Any], on: bool, view: StudentView, purpose: str) -> list[Any]:
    if view.shuffle and on:
        return seeded_shuffle(items, stream_seed(view.seed, view.item_id, purpose))
    return list(items)


def _negative_marking(view: StudentView) -> bool:
    entry = view.defaults.get("categorize")
    return isinstance(entry, dict) and entry.get("negativeMarking") is True


def categorize_to_student(config: CategorizeConfig, view: StudentView) -> dict[str, Any]:
    """Columns WITHOUT their cards (that list is the key), the cards, whether order counts.

    Cards and columns are each shuffled from their own stream when the question and the view
    say so; unshuffled, the cards keep the teacher's order.
    """
    student: dict[str, Any] = {
        "prompt": config.prompt,
        "columns": [
            {"id": c.id, "label": c.label}
            for c in _display(config.columns, config.shuffle_columns, view, "columns")
        ],
        "cards": [
            {"id": c.id, "text": c.text}
            for c in _display(config.cards, config.shuffle_cards, view, "cards")
        ],
        "ordered": config.ordered,
    }
    if _negative_marking(view):
        student["negativeMarking"] = True
    return student


def categorize_to_solution(config: CategorizeConfig) -> dict[str, Any]:
    """`{columns: [{id, cards}]}`: the key."""
    return {"columns": [{"id": c.id, "cards": list(c.cards)} for c in config.columns]}


CATEGORIZE_BUDGET = DraftBudget(
    text=PROMPT_MAX
    + CATEGORIZE_MAX_COLUMNS * (CATEGORIZE_LABEL_MAX + 64 + CATEGORIZE_MAX_CARDS * 40)
    + CATEGORIZE_MAX_CARDS * (CATEGORIZE_CARD_MAX + 64)
    + 1_024,
    values=64 + CATEGORIZE_MAX_COLUMNS * (8 + CATEGORIZE_MAX_CARDS) + CATEGORIZE_MAX_CARDS * 4,
)
