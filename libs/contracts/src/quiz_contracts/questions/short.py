"""short: one short answer checked by matchers of the question's kind (text, number or date)."""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import PARAMETER, ItemId, QuestionConfig, unique_ids

ShortKind = Literal["text", "number", "date"]
SHORT_KINDS: tuple[str, ...] = ("text", "number", "date")
SHORT_MAX_MATCHERS = 20
SHORT_VALUE_MAX = 200

_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _whole_parameter(value: str) -> bool:
    """A value that is one [[…]] expression (ADR-056): its kind is only known once drawn."""
    match = PARAMETER.fullmatch(value.strip())
    return match is not None


def read_value(kind: str, value: Any) -> str | None:
    """The canonical form of `value` read as `kind`, or None when it does not read as that kind.

    number: a decimal in '.' or ',' notation, written back with '.'; date: YYYY-MM-DD, a real
    day; text: trimmed, 1–200 characters. A whole [[…]] expression reads as any kind.
    """
    if not isinstance(value, str) or kind not in SHORT_KINDS:
        return None
    text = value.strip()
    if not text or len(text) > SHORT_VALUE_MAX:
        return None
    if _whole_parameter(text):
        return text
    if kind == "text":
        return text
    if kind == "number":
        if not _NUMBER.match(text):
            return None
        canonical = text.replace(",", ".")
        return canonical if math.isfinite(float(canonical)) else None
    if not _DATE.match(text):
        return None
    try:
        date.fromisoformat(text)
    except ValueError:
        return None
    return text


class ShortMatcher(WireModel):
    """One accepted answer. The matchers are the key and never reach a student."""

    id: ItemId
    kind: ShortKind
    value: str = Field(min_length=1, max_length=SHORT_VALUE_MAX, description="May be [[…]].")
    case_sensitive: bool = Field(default=False, description="text: compare case too.")
    tolerance: float = Field(default=0.0, ge=0, description="number: absolute tolerance.")

    @model_validator(mode="after")
    def _value_reads_as_kind(self) -> ShortMatcher:
        if read_value(self.kind, self.value) is None:
            raise ValueError(f"value {self.value!r} does not read as a {self.kind}")
        return self


class ShortConfig(QuestionConfig):
    """A short-answer question. Takes [[…]] parameters (ADR-056)."""

    kind: ShortKind = Field(default="text", description="What the student types; a setting.")
    matchers: list[ShortMatcher] = Field(min_length=1, max_length=SHORT_MAX_MATCHERS)

    @model_validator(mode="after")
    def _matchers_of_kind(self) -> ShortConfig:
        unique_ids(self.matchers, "matchers")
        if any(m.kind != self.kind for m in self.matchers):
            raise ValueError("matchers: every matcher has the question's kind")
        return self


def short_to_student(config: ShortConfig) -> dict[str, Any]:
    """The statement and the kind of input to show."""
    return {"prompt": config.prompt, "kind": config.kind}


def short_to_solution(config: ShortConfig) -> dict[str, Any]:
    """The accepted answers."""
    return {"matchers": [m.model_dump() for m in config.matchers]}
