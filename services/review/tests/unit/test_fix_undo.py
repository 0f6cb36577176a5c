"""Fix and Undo on the editor's draft (ADR-060 §4; cases after HQ review.db.test.ts, our words)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import draft_hash
from quiz_contracts.review import FindingFix, QuestionReview, ReviewFinding, ReviewFixRequest
from quiz_review.domain.fixes import fix_draft, fix_review


def mcq(prompt: str) -> dict[str, Any]:
    return {
        "configVersion": 2,
        "prompt": prompt,
        "choices": [{"text": "4", "correct": True}, {"text": "5", "correct": False}],
        "mode": "single",
        "policy": "inherit",
        "shuffleChoices": True,
    }


DRAFT = mcq("Quel est le resultat de 2 + 2 ?")
FINDINGS = [
    ReviewFinding(
        severity="notice",
        path="prompt",
        message="Faute : « resultat ».",
        fix=FindingFix(from_="resultat", to="résultat"),
    ),
    ReviewFinding(severity="warn", path="choices.1.text", message="Distracteur faible."),
    ReviewFinding(
        severity="error",
        path="choices.1.correct",
        message="5 est juste aussi.",
        fix=FindingFix(from_="false", to="true"),
    ),
    ReviewFinding(
        severity="notice",
        path="explanation",
        message="Accord.",
        fix=FindingFix(from_="additionés", to="additionnés"),
    ),
]
REVIEW = QuestionReview(
    version_number=2,
    state="findings",
    findings=FINDINGS,
    reviewed_at=datetime(2026, 7, 2, 0, 30, tzinfo=UTC),
)


def code_of(excinfo: pytest.ExceptionInfo[ContractError]) -> tuple[ErrorCode, int]:
    return excinfo.value.code, excinfo.value.status


def test_fix_then_undo_then_both_refused_twice() -> None:
    original = copy.deepcopy(DRAFT)
    fixed = fix_draft(FINDINGS, 0, undo=False, config=DRAFT, explanation="")
    assert fixed.config["prompt"] == "Quel est le résultat de 2 + 2 ?"
    assert fixed.findings[0].applied is True
    assert [f.applied for f in fixed.findings[1:]] == [False, False, False]
    assert DRAFT == original  # the draft received is never changed in place
    assert fixed.config["choices"] is DRAFT["choices"]  # only the path is copied

    # Applied once: a second Fix is stale whatever the draft holds.
    with pytest.raises(ContractError) as again:
        fix_draft(fixed.findings, 0, undo=False, config=DRAFT, explanation="")
    assert code_of(again) == (ErrorCode.fix_stale, 409)

    undone = fix_draft(fixed.findings, 0, undo=True, config=fixed.config, explanation="")
    assert undone.config == DRAFT
    assert undone.findings[0].applied is False

    # Undone once: an Undo of a fix that is not in the draft is stale.
    with pytest.raises(ContractError) as twice:
        fix_draft(undone.findings, 0, undo=True, config=DRAFT, explanation="")
    assert code_of(twice) == (ErrorCode.fix_stale, 409)


def test_a_draft_that_moved_on_refuses_the_fix() -> None:
    for prompt in (
        "Tout autre énoncé",  # the text is gone
        "Le resultat, le resultat ?",  # now twice
        "Quel est le RESULTAT de 2 + 2 ?",  # case-sensitive
    ):
        with pytest.raises(ContractError) as stale:
            fix_draft(FINDINGS, 0, undo=False, config=mcq(prompt), explanation="")
        assert code_of(stale) == (ErrorCode.fix_stale, 409)


def test_a_field_the_draft_no_longer_has_refuses_the_fix() -> None:
    draft = mcq("x") | {"choices": [{"text": "4", "correct": True}]}
    with pytest.raises(ContractError) as stale:
        fix_draft(FINDINGS, 2, undo=False, config=draft, explanation="")
    assert code_of(stale) == (ErrorCode.fix_stale, 409)


def test_a_tick_flips_and_flips_back() -> None:
    fixed = fix_draft(FINDINGS, 2, undo=False, config=DRAFT, explanation="")
    assert fixed.config["choices"][1]["correct"] is True
    undone = fix_draft(fixed.findings, 2, undo=True, config=fixed.config, explanation="")
    assert undone.config["choices"][1]["correct"] is False
    # The teacher ticked it by hand meanwhile: the draft no longer reads "false".
    ticked = copy.deepcopy(DRAFT)
    ticked["choices"][1]["correct"] = True
    with pytest.raises(ContractError) as stale:
        fix_draft(FINDINGS, 2, undo=False, config=ticked, explanation="")
    assert code_of(stale) == (ErrorCode.fix_stale, 409)


def test_the_explanation_is_fixed_on_the_draft_explanation() -> None:
    explanation = "Les nombres sont additionés."
    fixed = fix_draft(FINDINGS, 3, undo=False, config=DRAFT, explanation=explanation)
    assert fixed.explanation == "Les nombres sont additionnés."
    assert fixed.config is DRAFT


def test_no_fix_for_a_finding_without_one_or_no_finding_at_all() -> None:
    for index in (1, 4, 19):
        with pytest.raises(ContractError) as none:
            fix_draft(FINDINGS, index, undo=False, config=DRAFT, explanation="")
        assert code_of(none) == (ErrorCode.no_fix, 400)


def request(**fields: Any) -> ReviewFixRequest:
    return ReviewFixRequest(
        **({"finding": 0, "config": DRAFT, "explanation": "Parce que."} | fields)
    )


def test_fix_review_answers_the_new_draft_and_the_review_to_store() -> None:
    result = fix_review(request(version_number=2), 2, REVIEW)
    assert result.config["prompt"] == "Quel est le résultat de 2 + 2 ?"
    assert result.explanation == "Parce que."
    assert result.review.findings[0].applied is True
    assert result.review.version_number == 2
    assert result.draft_hash == draft_hash(DRAFT, "Parce que.")
    assert REVIEW.findings[0].applied is False  # the stored review is replaced, not mutated


@pytest.mark.parametrize(
    ("latest", "review", "fields", "expected"),
    [
        (None, None, {}, (ErrorCode.not_published, 400)),
        (2, None, {}, (ErrorCode.no_review, 400)),
        # A newer version was published and is not reviewed yet: its review is missing.
        (3, REVIEW, {}, (ErrorCode.no_review, 400)),
        # The editor shows the review of another version than the latest.
        (2, REVIEW, {"version_number": 1}, (ErrorCode.fix_stale, 409)),
        (2, REVIEW, {"finding": 1}, (ErrorCode.no_fix, 400)),
        (2, REVIEW, {"undo": True}, (ErrorCode.fix_stale, 409)),
    ],
)
def test_fix_review_refusals(
    latest: int | None,
    review: QuestionReview | None,
    fields: dict[str, Any],
    expected: tuple[ErrorCode, int],
) -> None:
    with pytest.raises(ContractError) as refused:
        fix_review(request(**fields), latest, review)
    assert code_of(refused) == expected
