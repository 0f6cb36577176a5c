"""States, the pill and the pool's tab (ADR-060 §3; HQ review.ts reviewPill, reviewStore.ts)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import QuestionReview, ReviewFinding, ReviewPill, ReviewState, Severity
from quiz_review.domain.states import (
    TabRow,
    pill_for,
    request_needs_review,
    require_published,
    require_review,
    require_reviewable,
    review_list,
    review_pill,
    worst_severity,
)

AT = datetime(2026, 7, 2, 0, 30, tzinfo=UTC)


def found(*severities: str) -> list[ReviewFinding]:
    return [ReviewFinding(severity=s, path="prompt", message="m") for s in severities]


def review(state: str, findings: list[ReviewFinding] | None = None) -> QuestionReview:
    return QuestionReview(version_number=1, state=state, findings=findings or [], reviewed_at=AT)


def test_the_worst_severity_is_error_then_warn_then_notice() -> None:
    assert worst_severity([Severity.notice, Severity.error, Severity.warn]) is Severity.error
    assert worst_severity([Severity.notice, Severity.warn]) is Severity.warn
    assert worst_severity([Severity.notice]) is Severity.notice
    assert worst_severity([]) is None


@pytest.mark.parametrize(
    ("state", "severities", "pill"),
    [
        ("findings", ("notice", "warn"), {"state": "findings", "count": 2, "worst": "warn"}),
        (
            "findings",
            ("notice", "error", "warn"),
            {"state": "findings", "count": 3, "worst": "error"},
        ),
        # Ignored: "LLM reviewed", its findings are not open any more.
        ("ignored", ("error",), {"state": "ignored", "count": 0, "worst": None}),
        ("clean", (), {"state": "clean", "count": 0, "worst": None}),
        ("failed", (), {"state": "failed", "count": 0, "worst": None}),
    ],
)
def test_the_pill_counts_open_findings_only(
    state: str, severities: tuple[str, ...], pill: dict[str, object]
) -> None:
    assert review_pill(ReviewState(state), found(*severities)).model_dump(mode="json") == pill


def test_no_row_no_pill_and_an_applied_fix_still_counts() -> None:
    assert pill_for(None) is None
    applied = [f.model_copy(update={"applied": True}) for f in found("error")]
    # The fix is in the draft, the published version still holds the mistake.
    assert pill_for(review("findings", applied)) == ReviewPill(
        state="findings", count=1, worst="error"
    )


def test_the_tab_lists_open_findings_and_counts_reviewed_and_pending() -> None:
    rows = [
        TabRow("q1", "typo", "mcq", review("findings", found("notice"))),
        TabRow("q2", "fine", "mcq", review("clean")),
        TabRow("q3", "ignored", "short", review("ignored", found("error"))),
        TabRow("q4", "broken call", "cloze", review("failed")),
        TabRow("q5", "new", "rich", None),
        TabRow("q6", "drawing", "circuit", None),
        TabRow("q7", "key", "categorize", review("findings", found("error", "warn"))),
    ]
    tab = review_list(True, rows)
    assert (tab.enabled, tab.reviewed, tab.pending) == (True, 4, 2)
    assert [(i.question_id, i.internal_name, i.type) for i in tab.items] == [
        ("q1", "typo", "mcq"),
        ("q7", "key", "categorize"),
    ]
    assert review_list(False, []).model_dump(mode="json") == {
        "enabled": False,
        "reviewed": 0,
        "pending": 0,
        "items": [],
    }


def test_refusals_before_any_call() -> None:
    for type_name in ("circuit", "diagram"):
        with pytest.raises(ContractError) as unsupported:
            require_reviewable(type_name)
        assert (unsupported.value.code, unsupported.value.status) == (
            ErrorCode.review_unsupported,
            400,
        )
    for type_name in ("mcq", "short", "cloze", "rich", "categorize", "code", "codeimage"):
        require_reviewable(type_name)
    with pytest.raises(ContractError) as draft_only:
        require_published(None)
    assert draft_only.value.code is ErrorCode.not_published
    assert require_published("v1") == "v1"
    with pytest.raises(ContractError) as none:
        require_review(None)
    assert none.value.code is ErrorCode.no_review


def test_a_request_reviews_a_version_once_unless_its_review_failed() -> None:
    assert request_needs_review(None)
    assert request_needs_review(review("failed"))
    for state in ("clean", "findings", "ignored"):
        assert not request_needs_review(review(state))
