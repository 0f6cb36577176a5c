"""short: one answer field of a kind (text, number, date, time) checked by matchers in order.

heig-quiz `packages/qt-short/src/schema.ts` (SHORT_CONFIG_VERSION 3), `server.ts` and the matcher
rules of `packages/domain/src/short.ts`. A matcher is `exact`, `regex`, `number`, `date`, `time`
or `llm` (stored, refused at publication); the first that accepts the answer gives its `points`.
The question's `prefilters` (trim, lowercase) apply to every text comparison; its `constraints`
say what the field accepts and travel to the student whole.

Draft:

    {"configVersion": 3, "prompt": "Capitale de la Suisse ?", "kind": "text",
     "constraints": {"minLength": 0, "maxLength": 255, "integer": false},
     "prefilters": {"trim": true, "lowercase": true},
     "matchers": [{"kind": "exact", "value": "Berne", "points": 1}]}
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    Number,
    PlatformModel,
    Prompt,
    StudentView,
    Utf16,
    int_in,
    js_number_text,
    refuse,
)

SHORT_CONFIG_VERSION = 3
SHORT_MAX_MATCHERS = 20
# Decision D10: the answer a student may type, hence what a text matcher holds.
SHORT_MAX_ANSWER_LENGTH = 500
SHORT_DEFAULT_MAX_LENGTH = 255
MAX_PATTERN_LENGTH = 300
ALLOWED_REGEX_FLAGS = re.compile(r"^[imsu]*$")
LLM_TEXT_MAX = 4_000

ShortKind = Literal["text", "number", "date", "time"]
SHORT_KINDS: tuple[str, ...] = ("text", "number", "date", "time")

# A plain decimal number as text (what an instance holds once [[…]] was replaced).
NUMERIC_TEXT = re.compile(r"^\s*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*$")
# One [[…]] reference, the whole field: the template of a parameterized question.
SHORT_REFERENCE = re.compile(r"^\s*\[\[[^\n]*\]\]\s*$")
ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
HH_MM = r"^[0-9]{2}:[0-9]{2}$"

_PYTHON_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": 0}


def is_valid_pattern(pattern: str, flags: str = "i") -> bool:
    """Whether a matcher's pattern compiles as a full match within decision D10's limits.

    The platform compiles with JavaScript's RegExp; this compiles with Python's `re`, which
    agrees on the common syntax (classes, groups, quantifiers, anchors). Compiling never runs
    the pattern, so a hostile one costs only its 300 characters.
    """
    if len(pattern) > MAX_PATTERN_LENGTH or not ALLOWED_REGEX_FLAGS.match(flags):
        return False
    if len(set(flags)) != len(flags):  # JavaScript refuses a repeated flag
        return False
    bits = 0
    for flag in flags:
        bits |= _PYTHON_FLAGS[flag]
    try:
        re.compile(f"^(?:{pattern})$", bits)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


class NumberOrReference:
    """A matcher's number: a JSON number, a numeric text (read as the number), or `[[…]]`.

    `numberOrReference` of schema.ts (ADR-056 §4): the template of a parameterized question
    stores `"[[t]]"`, its instances the interpolated text.
    """

    def __init__(self, lo: float | None = None) -> None:
        self.number = Number(lo)

    def validate(self, value: Any) -> float | str:
        """The number (or the reference, kept as text)."""
        if isinstance(value, str):
            if NUMERIC_TEXT.match(value):
                return self.number.validate(float(value.strip()))
            if len(value) <= MAX_PATTERN_LENGTH and SHORT_REFERENCE.match(value):
                return value
            raise PydanticCustomError(
                "number_or_reference", "Input should be a number or one [[…]] reference"
            )
        return self.number.validate(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(self.validate)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: Any) -> dict[str, Any]:
        return {"anyOf": [{"type": "number"}, {"type": "string"}]}


Points = Annotated[float, Number(0, 1)]


class ExactMatcher(PlatformModel):
    """The answer equals `value`, after the question's prefilters."""

    kind: Literal["exact"]
    value: Annotated[str, Utf16(1, SHORT_MAX_ANSWER_LENGTH)]
    points: Points = 1


class RegexMatcher(PlatformModel):
    """The answer fully matches `pattern` (flags among i, m, s, u)."""

    kind: Literal["regex"]
    pattern: Annotated[str, Utf16(1, MAX_PATTERN_LENGTH)]
    flags: Annotated[str, Utf16(pattern=r"^[imsu]*$")] = "i"
    points: Points = 1


class NumberMatcher(PlatformModel):
    """The answer reads as a number within `tolerance` (absolute, or relative to `value`)."""

    kind: Literal["number"]
    value: Annotated[float | str, NumberOrReference()]
    tolerance: Annotated[float | str, NumberOrReference(0)] = 0
    tolerance_mode: Literal["abs", "rel"] = "abs"
    unit: Annotated[str, Utf16(0, 16)] | None = None
    unit_required: bool = False
    points: Points = 1


class DateMatcher(PlatformModel):
    """The answer reads as a date within `toleranceDays` of `value` (YYYY-MM-DD)."""

    kind: Literal["date"]
    value: Annotated[str, Utf16(pattern=ISO_DATE)]
    tolerance_days: Annotated[int, int_in(0)] = 0
    points: Points = 1


class TimeMatcher(PlatformModel):
    """The answer reads as a time within `toleranceMinutes` of `value` (HH:MM)."""

    kind: Literal["time"]
    value: Annotated[str, Utf16(pattern=HH_MM)]
    tolerance_minutes: Annotated[int, int_in(0)] = 0
    points: Points = 1


class LlmMatcher(PlatformModel):
    """Phase 2: stored so an import round-trips, refused at publication, never matches."""

    kind: Literal["llm"]
    rubric: Annotated[str, Utf16(1, LLM_TEXT_MAX)]
    reference: Annotated[str, Utf16(0, LLM_TEXT_MAX)] | None = None
    points: Points = 1


def _matcher_tag(value: Any) -> str | None:
    # "~" tags are dropped from error paths by read_draft (zod's paths carry no tag); a model
    # (when serializing) carries its kind as an attribute.
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "~" + kind if isinstance(kind, str) else None


ShortMatcher = Annotated[
    Annotated[ExactMatcher, Tag("~exact")]
    | Annotated[RegexMatcher, Tag("~regex")]
    | Annotated[NumberMatcher, Tag("~number")]
    | Annotated[DateMatcher, Tag("~date")]
    | Annotated[TimeMatcher, Tag("~time")]
    | Annotated[LlmMatcher, Tag("~llm")],
    Discriminator(_matcher_tag),
]


class ShortConstraints(PlatformModel):
    """What the answer field accepts, per kind (only the current kind's fields are read)."""

    min_length: Annotated[int, int_in(0, SHORT_MAX_ANSWER_LENGTH)] = 0
    max_length: Annotated[int, int_in(1, SHORT_MAX_ANSWER_LENGTH)] = SHORT_DEFAULT_MAX_LENGTH
    min: Annotated[float, Number()] | None = None
    max: Annotated[float, Number()] | None = None
    integer: bool = False
    from_: Annotated[str, Utf16(pattern=ISO_DATE)] | None = Field(default=None, alias="from")
    to: Annotated[str, Utf16(pattern=ISO_DATE)] | None = None


class ShortPrefilters(PlatformModel):
    """Applied to the student's answer AND to every text or regex expectation."""

    trim: bool = True
    lowercase: bool = True


class ShortConfig(PlatformModel):
    """A short-answer question. Takes [[…]] parameters (ADR-056)."""

    config_version: Literal[3]
    prompt: Prompt
    kind: ShortKind = "text"
    constraints: ShortConstraints = Field(default_factory=ShortConstraints)
    prefilters: ShortPrefilters = Field(default_factory=ShortPrefilters)
    placeholder: Annotated[str, Utf16(0, 80)] | None = None
    matchers: Annotated[list[ShortMatcher], Field(min_length=1, max_length=SHORT_MAX_MATCHERS)]

    @model_validator(mode="after")
    def _rules(self) -> ShortConfig:
        issues: list[Issue] = []
        for index, matcher in enumerate(self.matchers):
            if isinstance(matcher, RegexMatcher) and not is_valid_pattern(
                matcher.pattern, matcher.flags
            ):
                issues.append(Issue(("matchers", index, "pattern"), "short.invalid_pattern"))
            # A field that only takes whole numbers cannot expect 3.5.
            if (
                self.constraints.integer
                and isinstance(matcher, NumberMatcher)
                and not isinstance(matcher.value, str)
                and not float(matcher.value).is_integer()
            ):
                issues.append(Issue(("matchers", index, "value"), "short.integer_expected"))
        c = self.constraints
        if c.min_length > c.max_length:
            issues.append(Issue(("constraints", "maxLength"), "short.length_range"))
        if c.min is not None and c.max is not None and c.min > c.max:
            issues.append(Issue(("constraints", "max"), "short.number_range"))
        if c.from_ is not None and c.to is not None and c.from_ > c.to:
            issues.append(Issue(("constraints", "to"), "short.date_range"))
        refuse(issues)
        return self


def default_constraints() -> dict[str, Any]:
    """`defaultShortConstraints()`."""
    return {"minLength": 0, "maxLength": SHORT_DEFAULT_MAX_LENGTH, "integer": False}


def empty_short_draft() -> dict[str, Any]:
    """`emptyShortDraft()`: one empty exact matcher, the placeholder the wand replaces."""
    return {
        "configVersion": SHORT_CONFIG_VERSION,
        "prompt": "",
        "kind": "text",
        "constraints": default_constraints(),
        "prefilters": {"trim": True, "lowercase": True},
        "matchers": [{"kind": "exact", "value": "", "points": 1}],
    }


def describe_matcher(matcher: Any) -> str:
    """The key as a teacher reads it (`describeMatcher`, domain/short.ts): `3.14 ± 1 %`."""
    if isinstance(matcher, RegexMatcher):
        return f"/{matcher.pattern}/{matcher.flags}"
    if isinstance(matcher, NumberMatcher):
        value = matcher.value if isinstance(matcher.value, str) else js_number_text(matcher.value)
        unit = "" if matcher.unit is None else f" {matcher.unit}"
        tolerance = matcher.tolerance
        if tolerance == 0:
            return f"{value}{unit}"
        if isinstance(tolerance, str):
            suffix = tolerance
        elif matcher.tolerance_mode == "rel":
            suffix = f"{js_number_text(tolerance * 100)} %"
        else:
            suffix = js_number_text(tolerance)
        return f"{value} ± {suffix}{unit}"
    if isinstance(matcher, LlmMatcher):
        return matcher.rubric
    return str(matcher.value)  # exact, date, time


def short_to_student(config: ShortConfig, view: StudentView) -> dict[str, Any]:
    """The prompt, the kind and the constraints (what the field takes, never what it expects)."""
    student: dict[str, Any] = {
        "prompt": config.prompt,
        "kind": config.kind,
        "constraints": config.constraints.wire(),
    }
    if config.placeholder is not None:
        student["placeholder"] = config.placeholder
    return student


def short_to_solution(config: ShortConfig) -> dict[str, Any]:
    """`{expected: [one line per matcher, in evaluation order]}`."""
    return {"expected": [describe_matcher(m) for m in config.matchers]}


SHORT_BUDGET = DraftBudget(
    text=PROMPT_MAX + SHORT_MAX_MATCHERS * (2 * LLM_TEXT_MAX + 64) + 2_048,
    values=64 + SHORT_MAX_MATCHERS * 16,
)
