"""ADR-059 "Generate": the wand's request, its result and its availability.

`POST /app/api/questions/{id}/generate` takes a `GenerateRequest` (the editor's draft as it
stands, in the platform's config shape of the question's type: `quiz_contracts.questions`) and
answers a `GenerateResult` (the merged draft). The result echoes `draft_hash`, the hash of the
draft RECEIVED, so the editor drops a reply whose draft it has edited since (§3).

Bounds (heig-quiz `apps/api/src/modules/pool/generate.ts` and the types' schemas): the output
budget of one call is 12,000 tokens for the whole wand and 1,500 for one item; the statement is
at most 20,000 characters and the whole draft at most what a valid config of its type holds
(`QuestionType.budget`); the explanation at most 20,000 characters.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ErrorBody, ErrorCode
from quiz_contracts.questions.mcq import MCQ_MAX_CHOICES
from quiz_contracts.review import LintFinding

# The model's output budgets, the platform's MAX_TOKENS: a program and its cases at worst.
GENERATE_MAX_OUTPUT_TOKENS = 12_000
GENERATE_ITEM_MAX_OUTPUT_TOKENS = 1_500
EXPLANATION_MAX = 20_000
# Only mcq has the wand of one element, and its list holds 12: the index is 0..11.
ITEM_INDEX_MAX = MCQ_MAX_CHOICES - 1
# The largest request body worth reading: the largest draft (a code question's budget, about
# 1.3 M characters) at up to 3 bytes a character in JSON, the explanation, and room for keys.
GENERATE_MAX_BODY_BYTES = 4 * 1024 * 1024


def draft_hash(config: Any, explanation: str) -> str:
    """Hex SHA-256 of the canonical JSON of `{"config", "explanation"}`.

    Canonical: keys sorted, no spaces (separators `,` and `:`), non-ASCII kept as UTF-8.
    """
    canonical = json.dumps(
        {"config": config, "explanation": explanation},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class GenerateRequest(WireModel):
    """The draft to complete; `item` asks for one element only (the per-choice wand)."""

    config: dict[str, Any] = Field(
        description="The draft config as it stands, in the platform's shape of the question's "
        "type (the grant's); may be invalid (D16)."
    )
    explanation: str = Field(default="", max_length=EXPLANATION_MAX)
    item: int | None = Field(
        default=None,
        ge=0,
        le=ITEM_INDEX_MAX,
        description="Index of ONE empty element to fill (mcq: a choice row).",
    )
    language: str | None = Field(
        default=None,
        min_length=2,
        max_length=35,
        pattern=r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$",
        description="The question's language (fr, en, de, it…), for the lint of the proposal "
        "(issue 30); absent: only the language-free criteria run.",
    )


class Incomplete(WireModel):
    """What is left to do after the merge: settle could not run or finish."""

    code: ErrorCode = Field(
        description="draft_invalid, runner_unavailable, compile_failed or partial."
    )
    message: str


class ProposalLint(WireModel):
    """The item-writing-flaw lint of the proposed draft (`review.v1.lint`, issue 30), shown to
    the teacher before saving. The proposal never waits on it: when the review service does not
    answer, `available` is false with the `reason` (`unavailable`, `timeout`) and no findings;
    a proposal the lint refuses (`draft_invalid`: an unfinished draft) has its `reason` too."""

    available: bool = Field(description="The review service answered.")
    findings: list[LintFinding] = Field(default_factory=list)
    checked: list[int] = Field(default_factory=list, description="The criteria run.")
    reason: ErrorBody | None = Field(
        default=None, description="Why there are no findings to show, when there is a reason."
    )


class GenerateResult(WireModel):
    """The merged draft, set by the editor as a teacher's edit with one Undo."""

    config: dict[str, Any]
    explanation: str
    incomplete: list[Incomplete] | None = Field(
        default=None, description="None when everything the type can settle was settled."
    )
    notices: list[str] = Field(default_factory=list, description="For the teacher, in English.")
    draft_hash: str = Field(description="draft_hash() of the request's config and explanation.")
    lint: ProposalLint | None = Field(
        default=None,
        description="mcq: the item-writing-flaw lint of the proposed draft (issue 30); other "
        "types: none.",
    )


class GenerateAvailability(WireModel):
    """`GET /app/api/generate/availability`: show the wand, and for which types."""

    available: bool = Field(description="A model can be called (a stored key).")
    types: list[str] = Field(default_factory=list, description="Types that have a generator.")
