"""A fix is one exact replacement in one field (ADR-060 §4); Fix and Undo apply it to a DRAFT.

Script of `POST /app/api/questions/{id}/review/fix` (the route loads, calls, stores, answers):

    latest = <the question's latest published version>      # None → not_published
    review = <that version's review row>                    # None → no_review
    result = fix_review(request, latest.number, review)     # no_fix / fix_stale (409)
    <store result.review.findings (the `applied` flag)>; answer result

Nothing published ever changes: the draft the editor sent comes back replaced, and the editor
stores it as the teacher's edit (HQ apps/api/src/modules/pool/review.ts applyReviewFix).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import draft_hash
from quiz_contracts.review import QuestionReview, ReviewFinding, ReviewFixRequest, ReviewFixResult
from quiz_review.domain.paths import EXPLANATION_PATH, MISSING, parse_path, value_at, with_value_at

_TICKS = ("true", "false")


def apply_fix(value: Any, from_: str, to: str) -> str | bool | None:
    """`value` with the fix applied, or None when it does not take it.

    - text: `from_` is non-empty and occurs exactly once, overlapping occurrences counted ("aa"
      occurs twice in "aaa"), case-sensitive; that occurrence becomes `to`;
    - tick (boolean): the value spelled "true"/"false" equals `from_` trimmed, and `to` trimmed
      is "true" or "false";
    - anything else (number, null, list, object) takes no fix.
    (HQ packages/domain/src/review.ts applyFix, FACTS E.)
    """
    if isinstance(value, bool):
        target = to.strip()
        if _spell(value) != from_.strip() or target not in _TICKS:
            return None
        return target == "true"
    if isinstance(value, str):
        if not from_:
            return None
        at = value.find(from_)
        # Searching again from the next character, not after the match, counts overlaps.
        if at < 0 or value.find(from_, at + 1) >= 0:
            return None
        return value[:at] + to + value[at + len(from_) :]
    return None


@dataclass(frozen=True, slots=True)
class FixedDraft:
    """The draft with one finding's replacement made (or unmade), and the findings after it."""

    config: dict[str, Any]
    explanation: str
    findings: list[ReviewFinding]


def fix_draft(
    findings: Sequence[ReviewFinding],
    index: int,
    *,
    undo: bool,
    config: dict[str, Any],
    explanation: str,
) -> FixedDraft:
    """Fix (or Undo) finding `index` of a review on the draft `config`/`explanation`.

    Raises ContractError:
    - `no_fix` (400): no finding at `index`, or it carries no fix;
    - `fix_stale` (409): Fix of an applied fix, Undo of one not applied, or the draft's value
      at the path does not take the replacement (the draft moved on since the review).
    Undo is the inverse replacement (`to` → `from`).
    """
    finding = findings[index] if 0 <= index < len(findings) else None
    if finding is None or finding.fix is None:
        raise ContractError(ErrorCode.no_fix, "this finding has no fix")
    # Fix once, Undo only what was fixed: an Undo of a fix never made would rewrite the
    # teacher's own text with no way back.
    if undo != finding.applied:
        state = "not applied" if undo else "already applied"
        raise ContractError(ErrorCode.fix_stale, f"the fix is {state}")
    from_, to = (finding.fix.to, finding.fix.from_) if undo else (finding.fix.from_, finding.fix.to)
    if finding.path == EXPLANATION_PATH:
        replaced = apply_fix(explanation, from_, to)
        if not isinstance(replaced, str):
            raise _stale()
        explanation = replaced
    else:
        segments = parse_path(finding.path)
        if segments is None:
            raise _stale()
        value = value_at(config, segments)
        replaced = None if value is MISSING else apply_fix(value, from_, to)
        if replaced is None:
            raise _stale()
        new_config = with_value_at(config, segments, replaced)
        if new_config is MISSING:
            raise _stale()
        config = new_config
    updated = [
        f.model_copy(update={"applied": not undo}) if i == index else f
        for i, f in enumerate(findings)
    ]
    return FixedDraft(config=config, explanation=explanation, findings=updated)


def fix_review(
    request: ReviewFixRequest, latest_version: int | None, review: QuestionReview | None
) -> ReviewFixResult:
    """The whole Fix/Undo of a route, given the latest published version and its review.

    Raises ContractError `not_published` (no published version), `no_review` (the latest version
    has no review row), `fix_stale` (the editor shows the review of another version, or see
    fix_draft), `no_fix`.
    """
    if latest_version is None:
        raise ContractError(ErrorCode.not_published, "the question has no published version")
    if review is None or review.version_number != latest_version:
        raise ContractError(ErrorCode.no_review, "the latest published version has no review")
    if request.version_number is not None and request.version_number != latest_version:
        raise ContractError(
            ErrorCode.fix_stale,
            f"version {latest_version} was published since the review you see "
            f"(of version {request.version_number})",
        )
    fixed = fix_draft(
        review.findings,
        request.finding,
        undo=request.undo,
        config=request.config,
        explanation=request.explanation,
    )
    return ReviewFixResult(
        config=fixed.config,
        explanation=fixed.explanation,
        review=review.model_copy(update={"findings": fixed.findings}),
        draft_hash=draft_hash(request.config, request.explanation),
    )


def _spell(value: bool) -> str:
    return "true" if value else "false"


def _stale() -> ContractError:
    return ContractError(
        ErrorCode.fix_stale, "the draft no longer holds the text this fix replaces exactly once"
    )
