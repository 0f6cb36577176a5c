"""The AnswerGenerator protocol (ADR-059 §1) and the defensive readers every merge shares.

heig-quiz `packages/core/src/generate.ts`: a type declares its statement, its instructions, a
NARROW proposal schema, a pure merge, optionally the wand of one list element (`item`: accepts
and place) and a settle that only running produces. A draft may be invalid (D16): a merge reads
it as raw JSON, keeps every value it does not own byte for byte, and only fills what is empty or
appends to lists. A proposal is the model's output: read as loosely, anything of the wrong shape
is skipped, never raised on. Where the platform's merge would overwrite a draft value that is
not of the expected shape (a `choices` that is not a list), these merges keep it instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from quiz_contracts.generate import Incomplete
from quiz_contracts.questions.common import js_trim, utf16_cut
from quiz_contracts.runner import RunReply, RunRequest

Merge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ItemWand:
    """The wand of ONE element of the type's list (ADR-059 §1 `item`): the MCQ choice's."""

    instructions: str
    schema: type[BaseModel]
    accepts: Callable[[Mapping[str, Any], int], bool]
    place: Callable[[dict[str, Any], int, dict[str, Any]], dict[str, Any]]
    # The largest index a request may name (the list's maximum length minus one).
    max_index: int


@dataclass(frozen=True)
class SettlePlan:
    """What settle runs: the request, and which draft elements its cases stand for."""

    request: RunRequest
    targets: list[int] = field(default_factory=list)


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
    def item(self) -> ItemWand | None:
        """The wand of one list element, when the type has one."""
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

    def settle_plan(self, config: Any) -> SettlePlan | None:
        """What to run for a VALID merged config (the type's model); None: nothing to run."""
        ...

    def settle_apply(
        self, draft: dict[str, Any], plan: SettlePlan, reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """The merged draft with what the run produced, and what is left to do."""
        ...

    def settle_notice(self, config: Any) -> str | None:
        """Why a valid config gave nothing to run, when the teacher should know."""
        ...


class BaseGenerator:
    """Defaults: no item wand, nothing to settle; `statement` is the config's prompt."""

    type_name: ClassVar[str]
    instructions: ClassVar[str]
    proposal_schema: ClassVar[type[BaseModel]]
    item: ClassVar[ItemWand | None] = None
    has_settle: ClassVar[bool] = False

    def statement(self, config: Mapping[str, Any]) -> str:
        """The statement the teacher wrote, '' when absent or not text."""
        return text_of(config, "prompt")

    def merge(self, config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
        """Filled by each type."""
        raise NotImplementedError

    def settle_plan(self, config: Any) -> SettlePlan | None:
        """Nothing to run by default."""
        return None

    def settle_apply(
        self, draft: dict[str, Any], plan: SettlePlan, reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """Nothing to apply by default."""
        return draft, []

    def settle_notice(self, config: Any) -> str | None:
        """Nothing to say by default."""
        return None


# --- Reading drafts and proposals defensively -------------------------------------------------


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a JSON value: what `if (c.correct)` reads."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, int | float):
        return value == value and value != 0  # NaN is falsy
    if isinstance(value, str):
        return value != ""
    return True  # objects and arrays, even empty ones


def text_of(mapping: Any, key: str) -> str:
    """A text field of a JSON object; '' when absent or of another type."""
    if isinstance(mapping, Mapping):
        value = mapping.get(key)
        if isinstance(value, str):
            return value
    return ""


def blank_text(value: Any) -> bool:
    """A draft text field the platform calls blank: absent, null, or text that trims to ''.

    A value of another type (a number where text belongs) is NOT blank here: it is kept.
    """
    return value is None or (isinstance(value, str) and not js_trim(value))


def writable(config: Mapping[str, Any], key: str) -> bool:
    """The field is free to write: absent, null or blank text (never a garbage value)."""
    return blank_text(config.get(key))


def draft_list(config: Mapping[str, Any], key: str) -> list[Any] | None:
    """The draft's list at `key` ([] when absent or null), or None when it holds a non-list."""
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


def proposal_string(proposal: Any, key: str) -> str | None:
    """A proposal's text field as written, None when absent or not text."""
    if isinstance(proposal, Mapping):
        value = proposal.get(key)
        if isinstance(value, str):
            return value
    return None


def trimmed_cut(text: str, limit: int) -> str:
    """`text.trim().slice(0, limit)`: what the platform does to an over-long proposal."""
    return utf16_cut(js_trim(text), limit)


def copy_draft(config: Any) -> dict[str, Any]:
    """A deep copy to write into, so the caller's draft is never mutated."""
    return copy.deepcopy(dict(config)) if isinstance(config, Mapping) else {}
