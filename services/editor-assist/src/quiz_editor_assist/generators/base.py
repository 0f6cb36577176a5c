"""The AnswerGenerator protocol (ADR-059 §1) and the defensive readers every merge shares.

A draft may be invalid (D16): a merge reads it as raw JSON, keeps every value it does not own
byte for byte, and only fills what is empty or appends to lists. A proposal is the model's tool
output: read as loosely, anything of the wrong shape is skipped, never raised on.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import Incomplete
from quiz_contracts.runner import RunReply, RunRequest

# Keys that an editor fills by itself: a list element holding nothing else is a placeholder row.
STRUCTURAL_KEYS = frozenset({"id", "kind", "visible"})

Merge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


class Proposal(WireModel):
    """Base of every proposal schema: the explanation is proposed in the same call (§2)."""

    explanation: str = Field(
        default="",
        description="Why the answer is right, for the student after the correction. "
        "Leave empty when the draft already has an explanation.",
    )


@dataclass(frozen=True)
class ItemCall:
    """The per-element wand: the schema of ONE element and the merge that places it."""

    schema: type[BaseModel]
    merge: Merge
    instructions: str


@runtime_checkable
class AnswerGenerator(Protocol):
    """What a question type declares to get the wand."""

    @property
    def type_name(self) -> str:
        """The question type it completes."""
        ...

    @property
    def instructions(self) -> str:
        """What to propose, in English, for the system prompt."""
        ...

    @property
    def proposal_schema(self) -> type[BaseModel]:
        """The NARROW schema of a proposal: never the statement, the settings nor ids."""
        ...

    @property
    def has_settle(self) -> bool:
        """Whether running the reference completes the draft (code, codeimage)."""
        ...

    def statement(self, config: Mapping[str, Any]) -> str:
        """The statement; the wand is refused while it is blank (statement_empty)."""
        ...

    def merge(self, config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
        """The draft completed by the proposal; pure, never changes what the teacher wrote."""
        ...

    def item(self, config: Mapping[str, Any], index: int) -> ItemCall:
        """The call for one empty element; item_not_empty when it is not empty."""
        ...

    def settle_plan(self, config: Mapping[str, Any]) -> RunRequest | None:
        """What to run to settle a VALID merged draft; None when there is nothing to run."""
        ...

    def settle_apply(
        self, config: dict[str, Any], reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """The draft with what the run produced, and what is left to do."""
        ...


class BaseGenerator:
    """Defaults: no item wand, nothing to settle; `statement` is the config's prompt."""

    type_name: ClassVar[str]
    instructions: ClassVar[str]
    proposal_schema: ClassVar[type[BaseModel]]
    has_settle: ClassVar[bool] = False

    def statement(self, config: Mapping[str, Any]) -> str:
        """The statement the teacher wrote, '' when absent or not text."""
        return text_of(config, "prompt")

    def merge(self, config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
        """Filled by each type."""
        raise NotImplementedError

    def item(self, config: Mapping[str, Any], index: int) -> ItemCall:
        """Only mcq offers the per-element wand."""
        raise ContractError(ErrorCode.invalid_request, f"{self.type_name} has no per-item wand")

    def settle_plan(self, config: Mapping[str, Any]) -> RunRequest | None:
        """Nothing to run by default."""
        return None

    def settle_apply(
        self, config: dict[str, Any], reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """Nothing to apply by default."""
        return config, []


# --- Reading drafts and proposals defensively -------------------------------------------------


def is_empty(value: Any) -> bool:
    """What an editor shows as nothing: None, blank text, [], {}, False or 0."""
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, dict)):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return False


def is_placeholder(item: Any) -> bool:
    """A list element the teacher wrote nothing in: a dict empty but for its id, kind, visible."""
    return isinstance(item, dict) and all(
        is_empty(v) for k, v in item.items() if k not in STRUCTURAL_KEYS
    )


def text_of(mapping: Any, key: str) -> str:
    """A text field of a JSON object; '' when absent or of another type."""
    if isinstance(mapping, Mapping):
        value = mapping.get(key)
        if isinstance(value, str):
            return value
    return ""


def is_blank_field(config: Mapping[str, Any], key: str) -> bool:
    """The field is free to write: absent, null or blank text (never a garbage value)."""
    value = config.get(key)
    return value is None or (isinstance(value, str) and not value.strip())


def draft_list(config: dict[str, Any], key: str) -> list[Any] | None:
    """The draft's list at `key` ([] when absent), or None when it holds a non-list to keep."""
    value = config.get(key)
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return None


def proposal_items(proposal: Any, key: str) -> list[Any]:
    """A proposal's list field; [] when absent or not a list."""
    if isinstance(proposal, Mapping):
        value = proposal.get(key)
        if isinstance(value, list):
            return value
    return []


def proposal_text(proposal: Any, key: str, limit: int = 20_000) -> str:
    """A proposal's text field, stripped; '' when absent, not text or over `limit`."""
    value = text_of(proposal, key).strip()
    return value if len(value) <= limit else ""


def taken_ids(*lists: list[Any]) -> set[str]:
    """Every string id of the dict elements of the lists."""
    return {
        item["id"]
        for items in lists
        for item in items
        if isinstance(item, dict) and isinstance(item.get("id"), str)
    }


def next_id(prefix: str, taken: set[str]) -> str:
    """The first `<prefix><n>` not taken, recorded as taken: deterministic, so merges stay pure."""
    n = 1
    while f"{prefix}{n}" in taken:
        n += 1
    found = f"{prefix}{n}"
    taken.add(found)
    return found


def copy_draft(config: Any) -> dict[str, Any]:
    """A deep copy to write into, so the caller's draft is never mutated."""
    return copy.deepcopy(dict(config)) if isinstance(config, Mapping) else {}


def merge_explanation(explanation: str, proposal: Any) -> str:
    """The explanation, written only when the teacher's is empty (§2)."""
    if isinstance(explanation, str) and explanation.strip():
        return explanation
    proposed = proposal_text(proposal, "explanation")
    return proposed or explanation
