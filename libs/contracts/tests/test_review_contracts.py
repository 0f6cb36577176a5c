"""The review's wire models speak the platform's camelCase (HQ packages/contracts/src/review.ts)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from quiz_contracts.errors import ErrorBody, ErrorCode, http_status
from quiz_contracts.review import (
    FindingFix,
    QuestionReview,
    QuestionVersionPublished,
    ReviewCompleted,
    ReviewFinding,
    ReviewFixRequest,
    ReviewList,
    ReviewToggle,
)

AT = datetime(2026, 7, 2, 0, 30, tzinfo=UTC)


def test_a_review_serialises_as_the_platform_reads_it() -> None:
    review = QuestionReview(
        version_number=3,
        state="findings",
        findings=[
            ReviewFinding(
                severity="notice",
                path="prompt",
                message="Typo.",
                fix=FindingFix(from_="resultat", to="résultat"),
            )
        ],
        reviewed_at=AT,
    )
    wire = json.loads(review.model_dump_json())
    assert wire == {
        "versionNumber": 3,
        "state": "findings",
        "findings": [
            {
                "severity": "notice",
                "path": "prompt",
                "message": "Typo.",
                "fix": {"from": "resultat", "to": "résultat"},
                "applied": False,
            }
        ],
        "reviewedAt": "2026-07-02T00:30:00Z",
    }
    assert QuestionReview.model_validate(wire) == review


def test_the_tab_and_its_schema_use_camel_case() -> None:
    schema = json.dumps(ReviewList.model_json_schema())
    for name in ("questionId", "internalName", "versionNumber", "reviewedAt"):
        assert f'"{name}"' in schema
    assert '"question_id"' not in schema


def test_the_switch_body_is_strict_like_the_platform() -> None:
    assert ReviewToggle.model_validate({"enabled": True}).enabled is True
    with pytest.raises(ValidationError):
        ReviewToggle.model_validate({"enabled": True, "pool": "x"})


def test_a_fix_request_names_a_finding_of_at_most_twenty() -> None:
    body = {"finding": 19, "config": {"prompt": "p"}, "explanation": "", "versionNumber": 2}
    assert ReviewFixRequest.model_validate(body).version_number == 2
    with pytest.raises(ValidationError):
        ReviewFixRequest.model_validate({**body, "finding": 20})


def test_event_times_must_carry_their_zone() -> None:
    event = {
        "questionId": "q",
        "poolId": "p",
        "versionId": "v",
        "versionNumber": 1,
        "type": "mcq",
        "config": {},
        "publishedAt": "2026-07-01T10:00:00",
        "live": True,
    }
    with pytest.raises(ValidationError):
        QuestionVersionPublished.model_validate(event)
    event["publishedAt"] = "2026-07-01T10:00:00+02:00"
    assert QuestionVersionPublished.model_validate(event).internal_name == ""


def test_a_completed_request_carries_a_review_or_an_error() -> None:
    review = QuestionReview(version_number=1, state="clean", reviewed_at=AT)
    error = ErrorBody(code=ErrorCode.not_published, message="no published version")
    assert ReviewCompleted(question_id="q", review=review).error is None
    assert ReviewCompleted(question_id="q", error=error).review is None
    with pytest.raises(ValidationError):
        ReviewCompleted(question_id="q")
    with pytest.raises(ValidationError):
        ReviewCompleted(question_id="q", review=review, error=error)


def test_review_refusals_have_the_platform_statuses() -> None:
    # HQ routeContext.ts: fix_stale is a 409, every other ReviewRefusal a 400.
    assert http_status(ErrorCode.fix_stale) == 409
    for code in ("review_unsupported", "no_fix", "no_review", "not_published"):
        assert http_status(code) == 400
