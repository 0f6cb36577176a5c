"""ADR-059 "Generate": the wand's request, its result and its availability.

`POST /app/api/questions/{id}/generate` takes a `GenerateRequest` (the editor's draft as it
stands) and answers a `GenerateResult` (the merged draft). The result echoes `draft_hash`, the
hash of the draft RECEIVED, so the editor drops a reply whose draft it has edited since (§3).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ErrorCode


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
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class GenerateRequest(WireModel):
    """The draft to complete; `item` asks for one element only (the per-choice wand)."""

    config: dict[str, Any] = Field(description="The draft config as it stands; may be invalid.")
    explanation: str = Field(default="", max_length=20_000)
    item: int | None = Field(
        default=None, ge=0, description="Index of ONE empty element to fill (mcq: a choice)."
    )


class Incomplete(WireModel):
    """What is left to do after the merge: settle could not run or finish."""

    code: ErrorCode = Field(
        description="draft_invalid, runner_unavailable, runner_busy, compile_failed or partial."
    )
    message: str


class GenerateResult(WireModel):
    """The merged draft, set by the editor as a teacher's edit with one Undo."""

    config: dict[str, Any]
    explanation: str
    incomplete: list[Incomplete] | None = Field(
        default=None, description="None when everything the type can settle was settled."
    )
    notices: list[str] = Field(default_factory=list, description="For the teacher, in English.")
    draft_hash: str = Field(description="draft_hash() of the request's config and explanation.")


class GenerateAvailability(WireModel):
    """`GET /app/api/generate/availability`: show the wand, and for which types."""

    available: bool = Field(description="A model can be called (a stored key).")
    types: list[str] = Field(default_factory=list, description="Types that have a generator.")
