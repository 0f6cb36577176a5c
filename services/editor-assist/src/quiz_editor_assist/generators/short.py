"""short: propose accepted answers `{value, tolerance?}`; each becomes a matcher of the kind.

heig-quiz `packages/qt-short/src/generate.ts` (`mergeShort`):

- the question's kind (text, number, date, time; absent or unknown: text) is the teacher's, the
  model never chooses it; a value that does not read as that kind is dropped;
- text → `{kind: exact, value, points: 1}`, trimmed, at most 500 characters;
- number → `{kind: number, value, tolerance, toleranceMode: abs, unitRequired: false,
  points: 1}`, the first comma read as a decimal point, the tolerance the absolute value of the
  proposed one (default 0);
- date → `YYYY-MM-DD` only (an impossible day passes), time → `HH:MM` only, tolerance 0;
- the teacher's matchers stay; the empty placeholder (an exact, date or time matcher with a
  blank value) goes, but ONLY when a matcher is added: otherwise the draft comes back as it was;
- dedupe: exact by trimmed lower-cased value (inner spacing counts), others by kind and value;
- at most 20 matchers.

Beyond the platform: a number is read as a decimal (`12`, `-3.5`, `1,5`, `2e3`); JavaScript's
`Number()` would also take `0x10` as 16, a quirk this merge does not copy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.questions.common import (
    js_number_text,
    js_trim,
    json_number,
    utf16_len,
)
from quiz_contracts.questions.short import (
    NUMERIC_TEXT,
    SHORT_MAX_ANSWER_LENGTH,
    SHORT_MAX_MATCHERS,
)
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    blank_text,
    copy_draft,
    draft_list,
    proposal_items,
    proposal_string,
)

_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_TIME = re.compile(r"^[0-9]{2}:[0-9]{2}$")


class ProposedAnswer(BaseModel):
    """One accepted answer, exactly as a student would type it."""

    value: str = Field(description="The answer as a student types it.")
    tolerance: float | None = Field(
        default=None, description="number only: the absolute tolerance to accept."
    )


class ShortProposal(BaseModel):
    """Accepted answers; their kind is the question's, never the model's."""

    answers: list[ProposedAnswer]


INSTRUCTIONS = """\
The question is a short-answer question, graded by comparing the student's answer with \
accepted values. The draft's `kind` is the kind of the answer and is not yours to change: \
`text`, `number`, `date` (YYYY-MM-DD) or `time` (HH:MM). Propose the accepted answers in \
`answers`, each a `value` exactly as a student would type it. For `text`: the expected answer \
and its common acceptable variants (spellings, synonyms, with or without an article); case and \
surrounding spaces are already ignored. For `number`: the value, with an absolute `tolerance` \
when rounding is to be accepted. Never repeat an answer the draft holds.\
"""


def _kind(config: Mapping[str, Any]) -> str:
    kind = config.get("kind")
    return kind if kind in ("number", "date", "time") else "text"


def _number(text: str) -> float | None:
    candidate = text.replace(",", ".", 1)
    if not NUMERIC_TEXT.match(candidate):
        return None
    value = float(candidate)
    return value if math.isfinite(value) else None


def matcher_of(kind: str, raw: Any) -> dict[str, Any] | None:
    """One proposed answer as a matcher of `kind`, or None when it does not read as one."""
    value = proposal_string(raw, "value")
    if value is None:
        return None
    text = js_trim(value)
    if not text:
        return None
    if kind == "number":
        number = _number(text)
        if number is None:
            return None
        tolerance = raw.get("tolerance") if isinstance(raw, Mapping) else None
        width = 0.0
        if isinstance(tolerance, int | float) and not isinstance(tolerance, bool):
            width = abs(float(tolerance)) if math.isfinite(tolerance) else 0.0
        return {
            "kind": "number",
            "value": json_number(number),
            "tolerance": json_number(width),
            "toleranceMode": "abs",
            "unitRequired": False,
            "points": 1,
        }
    if kind == "date":
        return (
            {"kind": "date", "value": text, "toleranceDays": 0, "points": 1}
            if _DATE.match(text)
            else None
        )
    if kind == "time":
        return (
            {"kind": "time", "value": text, "toleranceMinutes": 0, "points": 1}
            if _TIME.match(text)
            else None
        )
    if utf16_len(text) > SHORT_MAX_ANSWER_LENGTH:
        return None
    return {"kind": "exact", "value": text, "points": 1}


def is_placeholder(matcher: Any) -> bool:
    """The empty matcher of a fresh draft, or one the teacher cleared."""
    return (
        isinstance(matcher, dict)
        and matcher.get("kind") in ("exact", "date", "time")
        and blank_text(matcher.get("value"))
    )


def dedupe_key(matcher: Any) -> str | None:
    """`exact:<trimmed lower value>` or `<kind>:<value as JavaScript prints it>`; None: no key."""
    if not isinstance(matcher, dict) or "value" not in matcher:
        return None
    value = matcher["value"]
    if matcher.get("kind") == "exact":
        return "exact:" + js_trim(value).lower() if isinstance(value, str) else None
    if isinstance(value, bool) or value is None:
        return f"{matcher.get('kind')}:{'null' if value is None else str(value).lower()}"
    if isinstance(value, int | float):
        return f"{matcher.get('kind')}:{js_number_text(value)}"
    return f"{matcher.get('kind')}:{value}" if isinstance(value, str) else None


def merge_short_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Drop the empty placeholder only when a matcher is added; append new matchers of the kind."""
    merged = copy_draft(config)
    matchers = draft_list(merged, "matchers")
    if matchers is None:
        return merged  # not a list: the teacher's, kept
    kept = [m for m in matchers if not is_placeholder(m)]
    seen = {key for key in map(dedupe_key, kept) if key is not None}
    kind = _kind(merged)
    added: list[dict[str, Any]] = []
    for raw in proposal_items(proposal, "answers"):
        if len(kept) + len(added) >= SHORT_MAX_MATCHERS:
            break
        matcher = matcher_of(kind, raw)
        key = dedupe_key(matcher)
        if matcher is None or key is None or key in seen:
            continue
        seen.add(key)
        added.append(matcher)
    if not added:
        return merged  # nothing usable: the draft as it was, placeholder included
    merged["matchers"] = [*kept, *added]
    return merged


class ShortGenerator(BaseGenerator):
    """The short-answer wand."""

    type_name = "short"
    instructions = INSTRUCTIONS
    proposal_schema = ShortProposal

    merge = staticmethod(merge_short_proposal)
