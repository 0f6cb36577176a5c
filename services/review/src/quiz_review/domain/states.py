"""States, the pill, the pool's tab, and the refusals checked before any model call (ADR-060).

- The pill of a question is its LATEST published version's review: no row, no pill; `clean` and
  `ignored` read "LLM reviewed" (count 0); `findings` carries the count of its findings and the
  worst severity (error > warn > notice). Findings whose fix was applied to the draft still
  count: the published version still holds the mistake until the teacher publishes.
  (HQ packages/domain/src/review.ts reviewPill, FACTS E.)
- The tab lists the latest reviewable versions in state `findings`; `reviewed` counts those with
  a row that is not `failed`, `pending` the others (HQ reviewStore.ts poolReviews).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import (
    QuestionReview,
    ReviewFinding,
    ReviewList,
    ReviewListItem,
    ReviewPill,
    ReviewState,
    Severity,
)

# ADR-060 §1: their configs are drawings, not text a model can read.
UNREVIEWED_TYPES: Final = frozenset({"circuit", "diagram"})

T = TypeVar("T")

_SEVERITY_RANK: Final = {Severity.notice: 1, Severity.warn: 2, Severity.error: 3}


def worst_severity(severities: Iterable[Severity]) -> Severity | None:
    """error, else warn, else notice; None for none."""
    return max(severities, key=_SEVERITY_RANK.__getitem__, default=None)


def review_pill(state: ReviewState, findings: Sequence[ReviewFinding]) -> ReviewPill:
    """The pill of a review row: count and worst of its open findings (state findings only)."""
    open_findings = findings if state is ReviewState.findings else ()
    return ReviewPill(
        state=state,
        count=len(open_findings),
        worst=worst_severity(f.severity for f in open_findings),
    )


def pill_for(review: QuestionReview | None) -> ReviewPill | None:
    """The pill of the latest published version's review; None (no pill) without a row."""
    return None if review is None else review_pill(review.state, review.findings)


@dataclass(frozen=True, slots=True)
class TabRow:
    """A latest published version of a live, reviewable question of the pool, with its row."""

    question_id: str
    internal_name: str
    type: str
    review: QuestionReview | None


def review_list(enabled: bool, rows: Iterable[TabRow]) -> ReviewList:
    """The pool's tab from its latest reviewable versions (any order in, the order kept out)."""
    reviewed = pending = 0
    items: list[ReviewListItem] = []
    for row in rows:
        if row.type in UNREVIEWED_TYPES:
            continue
        if row.review is None or row.review.state is ReviewState.failed:
            pending += 1
            continue
        reviewed += 1
        if row.review.state is ReviewState.findings:
            items.append(
                ReviewListItem(
                    question_id=row.question_id,
                    internal_name=row.internal_name,
                    type=row.type,
                    review=row.review,
                )
            )
    return ReviewList(enabled=enabled, reviewed=reviewed, pending=pending, items=items)


def request_needs_review(existing: QuestionReview | None) -> bool:
    """Whether a `review.v1.requests` message calls the model (dedupe by version).

    Only a version without a row, or whose review failed, is reviewed; otherwise the request is
    answered with the review the version already has. An ignored version is never reviewed again.
    ("Review now" is the teacher's explicit ask and reviews the latest version whatever its row.)
    """
    return existing is None or existing.state is ReviewState.failed


def is_reviewable(type_name: str) -> bool:
    """Every type but circuit and diagram."""
    return type_name not in UNREVIEWED_TYPES


def require_reviewable(type_name: str) -> None:
    """ContractError `review_unsupported` (400) for circuit and diagram."""
    if not is_reviewable(type_name):
        raise ContractError(
            ErrorCode.review_unsupported,
            f"{type_name} questions are drawings: they are not reviewed",
        )


def require_published(latest_version: T | None) -> T:
    """The latest published version; ContractError `not_published` (400) while a draft only."""
    if latest_version is None:
        raise ContractError(ErrorCode.not_published, "the question has no published version")
    return latest_version


def require_review(review: QuestionReview | None) -> QuestionReview:
    """The latest version's review (Ignore, Fix); ContractError `no_review` (400) without one."""
    if review is None:
        raise ContractError(ErrorCode.no_review, "the latest published version has no review")
    return review
