"""short: propose accepted values; each becomes a matcher of the question's kind (ADR-059 §2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from quiz_contracts.questions.short import SHORT_KINDS, SHORT_MAX_MATCHERS, read_value
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    Proposal,
    copy_draft,
    draft_list,
    is_placeholder,
    next_id,
    proposal_items,
    taken_ids,
)


class ShortProposal(Proposal):
    """Accepted answers; their kind is the question's, never the model's."""

    values: list[str] = Field(
        default_factory=list,
        max_length=SHORT_MAX_MATCHERS,
        description="Accepted answers. number: digits with '.'; date: YYYY-MM-DD; text: short.",
    )


INSTRUCTIONS = """\
Propose the accepted answers of this short-answer question, in `values`. `kind` says what the \
student types: text (a word or a few words: give the usual spellings and equivalent forms, not \
case variants), number (one value, digits with '.' as decimal separator) or date (YYYY-MM-DD). \
Never repeat an accepted answer already in `matchers`.\
"""


def _kind(config: Mapping[str, Any]) -> str:
    kind = config.get("kind")
    return kind if isinstance(kind, str) and kind in SHORT_KINDS else "text"


def _same_key(kind: str, value: str) -> str:
    """Comparison form: a number by its value, a text folded, a date as written."""
    if kind == "number":
        try:
            return repr(float(value))
        except ValueError:
            return value
    return " ".join(value.split()).casefold() if kind == "text" else value


def merge_short_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Drop the empty placeholder, append one matcher of the question's kind per new value."""
    merged = copy_draft(config)
    matchers = draft_list(merged, "matchers")
    if matchers is None:
        return merged
    kind = _kind(merged)
    kept = [m for m in matchers if not is_placeholder(m)]
    known = {
        _same_key(kind, m["value"])
        for m in kept
        if isinstance(m, dict) and isinstance(m.get("value"), str)
    }
    taken = taken_ids(matchers)
    for raw in proposal_items(proposal, "values"):
        value = read_value(kind, raw)
        if value is None or _same_key(kind, value) in known:
            continue
        if len(kept) >= SHORT_MAX_MATCHERS:
            break
        kept.append({"id": next_id("m", taken), "kind": kind, "value": value})
        known.add(_same_key(kind, value))
    if kept != matchers:
        merged["matchers"] = kept
    return merged


class ShortGenerator(BaseGenerator):
    """The short-answer wand."""

    type_name = "short"
    instructions = INSTRUCTIONS
    proposal_schema = ShortProposal

    merge = staticmethod(merge_short_proposal)
