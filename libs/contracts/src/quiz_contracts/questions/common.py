"""What every question type shares: the platform's JSON conventions, its text rules, draft reading.

The configs are the platform's (heig-tin-info/heig-quiz, `packages/qt-<type>/src/schema.ts`): the
same camelCase field names on the wire, the same limits and defaults, a `configVersion` literal,
and refinements whose messages are the platform's i18n keys (`mcq.single_needs_one`). The
platform's schemas are zod: strings are counted in UTF-16 code units, integers may arrive as
`3.0`, unknown keys are dropped, nothing is coerced from text. `PlatformModel` and the types
below reproduce those rules so that a draft valid there is valid here and the reverse.

A question is its type, its `config` and its `explanation`, a text kept beside the config: the
teacher's, never part of `to_student`. Drafts are stored whatever they hold (decision D16), so
every reader here accepts any JSON value and reports, never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from quiz_contracts.base import WireModel

# The statement of every type: `prompt: z.string().min(1).max(20_000)` in each schema.ts.
PROMPT_MAX = 20_000

# A parameter expression of a parameterized question (ADR-056): `[[a+b]]`, drawn per student.
PARAMETER = re.compile(r"\[\[(.+?)\]\]", re.DOTALL)
# A link to a stored asset (an image of the statement): `asset:<id>` inside markdown or alone.
ASSET_LINK = re.compile(r"asset:[A-Za-z0-9_./-]+")

# --- JavaScript's text rules -----------------------------------------------------------------
# The platform compares, trims and cuts texts with JavaScript; Python's own rules differ at the
# edges (str.strip() keeps U+FEFF and removes U+001C..U+001F; len() counts code points, not the
# UTF-16 units zod's .max() counts), so the few rules a merge depends on are spelled out here.

# ECMAScript WhiteSpace and LineTerminator: what String.prototype.trim() and /\s/ match.
_JS_SPACE = (
    "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)
_JS_SPACE_RUN = re.compile(_JS_SPACE + "+")
_JS_EDGES = re.compile(f"^{_JS_SPACE}+|{_JS_SPACE}+$")


def js_trim(text: str) -> str:
    """`text.trim()` as JavaScript does it."""
    return _JS_EDGES.sub("", text)


def js_collapse(text: str) -> str:
    """`text.replace(/\\s+/g, " ")`: every run of JavaScript whitespace made one space."""
    return _JS_SPACE_RUN.sub(" ", text)


def same_text(text: str) -> str:
    """The platform's comparison form of a written text: trimmed, lower-cased, spaces collapsed.

    `same` in qt-mcq/src/generate.ts and `norm` in qt-categorize/src/generate.ts.
    """
    return js_collapse(js_trim(text).lower())


def is_blank(value: Any) -> bool:
    """What an editor shows as an empty field: None, or text that trims to nothing."""
    return value is None or (isinstance(value, str) and not js_trim(value))


def utf16_len(text: str) -> int:
    """The length JavaScript's `String.length` (and zod's `.max()`) reports: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_cut(text: str, limit: int) -> str:
    """`text.slice(0, limit)` in UTF-16 units, never splitting a surrogate pair (it drops it)."""
    if len(text) <= limit // 2 or utf16_len(text) <= limit:
        return text
    units = text.encode("utf-16-le", "surrogatepass")[: 2 * limit]
    if units and 0xD8 <= units[-1] <= 0xDB:  # a high surrogate whose pair was cut off
        units = units[:-2]
    return units.decode("utf-16-le", "surrogatepass")


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of a text, as `charCodeAt` reads them."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]


def js_number_text(value: float | int) -> str:
    """`String(value)` for a JavaScript number: `3`, `0.1`, `1e-7`, `1e+21` (ECMA-262 rules)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value == 0:
            return "0"
    if isinstance(value, int) and abs(value) < 10**21:
        return str(value)
    sign = "-" if value < 0 else ""
    # repr() gives the shortest digits that round-trip, the digits ECMAScript prints.
    digits_tuple = Decimal(repr(abs(float(value)))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent)
    k = len(digits)
    n = exponent + k  # the decimal point sits after n digits
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def json_number(value: float) -> int | float:
    """A number as the platform writes it to JSON: an integral value without its `.0`."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def parameters(text: str) -> list[str]:
    """The [[…]] expressions of a text, in order, as written."""
    return PARAMETER.findall(text)


def asset_links(text: str) -> list[str]:
    """The asset: links of a text, in order."""
    return ASSET_LINK.findall(text)


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


# --- The platform's zod rules as pydantic types ------------------------------------------------


class PlatformModel(BaseModel):
    """A shape of the platform: camelCase on the wire only, strict types, unknown keys dropped.

    zod neither coerces "3" to 3 nor "true" to true, so the model is strict; it reads the
    camelCase names only (a snake_case key is an unknown key, dropped as zod drops it).
    """

    model_config = ConfigDict(
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        extra="ignore",
    )

    def wire(self) -> dict[str, Any]:
        """The JSON object the platform would hold: camelCase, absent optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StrictPlatformModel(PlatformModel):
    """A zod `strictObject`: an unknown key is refused, not dropped."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Utf16:
    """`z.string().min(a).max(b)` (and `.regex()`): bounds counted in UTF-16 units, as zod does.

    Use as `Annotated[str, Utf16(1, 2000)]`.
    """

    min_len: int = 0
    max_len: int | None = None
    pattern: str | None = None

    def validate(self, value: Any) -> str:
        """The value when it is a string within the bounds; a pydantic error otherwise."""
        if not isinstance(value, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        length = utf16_len(value)
        if length < self.min_len:
            raise PydanticCustomError(
                "string_too_short",
                "String should have at least {min_length} characters",
                {"min_length": self.min_len},
            )
        if self.max_len is not None and length > self.max_len:
            raise PydanticCustomError(
                "string_too_long",
                "String should have at most {max_length} characters",
                {"max_length": self.max_len},
            )
        if self.pattern is not None and not re.search(self.pattern, value):
            raise PydanticCustomError(
                "string_pattern_mismatch",
                "String should match pattern '{pattern}'",
                {"pattern": self.pattern},
            )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(self.validate)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string"}
        if self.min_len:
            out["minLength"] = self.min_len
        if self.max_len is not None:
            out["maxLength"] = self.max_len
        if self.pattern is not None:
            out["pattern"] = self.pattern
        return out


@dataclass(frozen=True)
class Number:
    """`z.number()` (`.int()`, `.min()`, `.max()`): a finite JSON number, never a boolean.

    An integer field takes `3.0` as 3, as JavaScript does. Use as `Annotated[int, Number(...)]`.
    """

    lo: float | None = None
    hi: float | None = None
    integer: bool = False

    def validate(self, value: Any) -> int | float:
        """The number when it is one within the bounds; a pydantic error otherwise."""
        kind = "integer" if self.integer else "number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PydanticCustomError(f"{kind}_type", f"Input should be a valid {kind}")
        if isinstance(value, float) and not math.isfinite(value):
            raise PydanticCustomError("finite_number", "Input should be a finite number")
        if self.integer:
            if isinstance(value, float) and not value.is_integer():
                raise PydanticCustomError("int_from_float", "Input should be a valid integer")
            value = int(value)
        if self.lo is not None and value < self.lo:
            raise PydanticCustomError(
                "greater_than_equal",
                "Input should be greater than or equal to {ge}",
                {"ge": self.lo},
            )
        if self.hi is not None and value > self.hi:
            raise PydanticCustomError(
                "less_than_equal", "Input should be less than or equal to {le}", {"le": self.hi}
            )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(self.validate)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        if self.lo is not None:
            out["minimum"] = self.lo
        if self.hi is not None:
            out["maximum"] = self.hi
        return out


def int_in(lo: int | None = None, hi: int | None = None) -> Number:
    """`z.number().int().min(lo).max(hi)`, as an annotation marker."""
    return Number(lo, hi, integer=True)


# The statement every type has.
Prompt = Annotated[str, Utf16(1, PROMPT_MAX)]


@dataclass(frozen=True)
class Issue:
    """One failed refinement: where (relative to the model checked) and the platform's i18n key."""

    path: tuple[str | int, ...]
    key: str


def refuse(issues: Iterable[Issue]) -> None:
    """Raise the refinements that failed as one validation error; nothing when none did.

    read_draft expands them back into one Problem each, with their own paths.
    """
    found = list(issues)
    if found:
        raise PydanticCustomError(
            "refinement",
            "{key}",
            {"key": found[0].key, "issues": [(list(i.path), i.key) for i in found]},
        )


class Problem(WireModel):
    """One reason a draft is not a valid config: the path of the field and what is wrong."""

    path: str = Field(description="Dotted path, e.g. 'choices.2.text'; '' for the whole config.")
    message: str = Field(description="The platform's i18n key for a rule, else the shape error.")


@dataclass(frozen=True)
class StudentView:
    """How one student sees a question: the attempt's seed, the item, whether to shuffle.

    The platform's `StudentView` (packages/core): permutations are never stored but recomputed
    from (seed, itemId, purpose). `defaults` carries the evaluation's per-type settings
    (categorize's negative marking). The default view is the teacher's preview, unshuffled.
    """

    seed: int = 0
    item_id: str = ""
    shuffle: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)


# --- Draft budgets -------------------------------------------------------------------------------


# The deepest valid config nests 7 levels (a diagram's `reference.nodes.0.pts.0.0`); a draft
# nested deeper than this cannot become a valid question, whatever its type.
DRAFT_MAX_DEPTH = 32


@dataclass(frozen=True)
class DraftBudget:
    """The most a draft of a type can hold: characters of text (keys included), JSON values,
    and nesting depth.

    Each type derives its budget from its own limits (the largest valid config, with room for
    the keys): a draft over it cannot become a valid question, so it is refused before any
    model is paid to read it.
    """

    text: int
    values: int
    depth: int = DRAFT_MAX_DEPTH


@dataclass(frozen=True)
class DraftSize:
    """What a draft holds: UTF-16 units of every string and key, every JSON value, its depth."""

    text: int
    values: int
    depth: int = 0

    def over(self, budget: DraftBudget) -> bool:
        """Whether this draft holds more than the budget allows."""
        return self.text > budget.text or self.values > budget.values or self.depth > budget.depth


def measure_draft(value: Any, budget: DraftBudget | None = None) -> DraftSize:
    """Count a JSON value's text, values and depth, iteratively; stops once over `budget`."""
    text = values = deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        values += 1
        deepest = max(deepest, depth)
        if isinstance(item, str):
            text += utf16_len(item)
        elif isinstance(item, dict):
            for key, inner in item.items():
                text += utf16_len(str(key))
                stack.append((inner, depth + 1))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in item)
        if budget is not None and DraftSize(text, values, deepest).over(budget):
            break
    return DraftSize(text=text, values=values, depth=deepest)
