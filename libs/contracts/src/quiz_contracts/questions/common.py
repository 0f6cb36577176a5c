"""What every question type shares: ids, texts, [[…]] parameters, asset: links, draft problems.

A question is its type, its `config` (this package's models) and its `explanation`, a text kept
beside the config: it is the teacher's, never part of `to_student`, and is released with the
correction by the platform, not by the type. Configs are stored as drafts (D16) that may be
invalid at any time, so every reader here accepts any JSON value and reports, never raises.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from quiz_contracts.base import WireModel

# An id is the editor's handle on a list element; short, stable, never shown to a student as text.
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
ItemId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]

# A parameter expression of a parameterized question (ADR-056): `[[a+b]]`, drawn per student.
PARAMETER = re.compile(r"\[\[(.+?)\]\]", re.DOTALL)
# A link to a stored asset (an image of the statement): `asset:<id>` inside markdown or alone.
ASSET_LINK = re.compile(r"asset:[A-Za-z0-9_./-]+")

PROMPT_MAX = 20_000
TEXT_MAX = 2_000


def parameters(text: str) -> list[str]:
    """The [[…]] expressions of a text, in order, as written."""
    return PARAMETER.findall(text)


def asset_links(text: str) -> list[str]:
    """The asset: links of a text, in order."""
    return ASSET_LINK.findall(text)


def is_blank(value: Any) -> bool:
    """True for what an editor shows as an empty field: None, '' or whitespace."""
    return value is None or (isinstance(value, str) and not value.strip())


def normalized_text(value: str) -> str:
    """Comparison form of a written text: case and spacing folded, so 'Paris ' repeats 'paris'."""
    return " ".join(value.split()).casefold()


def strings_in(value: Any) -> list[str]:
    """Every string of a JSON value, depth first: what a text scan (assets, parameters) reads."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def keys_in(value: Any) -> set[str]:
    """Every object key of a JSON value, at any depth: what the leak check reads."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.update(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def unique_ids(items: list[Any], where: str) -> None:
    """Raise ValueError when two elements of a list share an id (a validator helper)."""
    seen: set[str] = set()
    for item in items:
        item_id = getattr(item, "id", None)
        if item_id is None:
            continue
        if item_id in seen:
            raise ValueError(f"{where}: duplicate id {item_id!r}")
        seen.add(item_id)


class Problem(WireModel):
    """One reason a draft is not a valid config: the path of the field and what is wrong."""

    path: str = Field(description="Dotted path, e.g. 'choices.2.text'; '' for the whole config.")
    message: str


class QuestionConfig(WireModel):
    """Base of every config: a statement (`prompt`, markdown) the student reads."""

    prompt: str = Field(min_length=1, max_length=PROMPT_MAX)

    @model_validator(mode="after")
    def _prompt_not_blank(self) -> QuestionConfig:
        if not self.prompt.strip():
            raise ValueError("prompt: the statement is empty")
        return self
