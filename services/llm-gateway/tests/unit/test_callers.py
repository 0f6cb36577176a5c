"""Who may spend on what (issue 29 item 5): the pure rule the gateway applies before any hold."""

from __future__ import annotations

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CALLER_PURPOSES, Purpose
from quiz_llm_gateway.domain.callers import authorize

OWN = {
    "editor-assist": Purpose.generate,
    "review": Purpose.review,
    "poll": Purpose.poll,
    "lesson-fix": Purpose.lesson_fix,
}


# The platform's own calls (FACTS E2) that none of our services makes (issue 31 item 1).
PLATFORM = {
    Purpose.test,
    Purpose.grade,
    Purpose.assist,
    Purpose.assistant,
    Purpose.describe,
    Purpose.domain,
    Purpose.concepts,
}


def test_the_table_gives_each_service_its_own_purpose_only() -> None:
    assert {caller: set(p) for caller, p in CALLER_PURPOSES.items()} == {
        **{caller: {purpose} for caller, purpose in OWN.items()},
        "platform": PLATFORM,
    }


def test_the_platform_calls_for_its_own_purposes_never_a_services() -> None:
    for purpose in PLATFORM:
        authorize("platform", purpose, None, "teacher-1")
    for purpose in OWN.values():
        with pytest.raises(ContractError) as e:
            authorize("platform", purpose, None, "teacher-1")
        assert e.value.code == ErrorCode.forbidden
    # The assistant bills the person acting.
    with pytest.raises(ContractError):
        authorize("platform", Purpose.assist, "someone-else", "teacher-1")


@pytest.mark.parametrize("caller", sorted(OWN))
def test_each_caller_may_call_for_its_own_purpose(caller: str) -> None:
    authorize(caller, OWN[caller], None, "teacher-1")
    authorize(caller, OWN[caller], "teacher-1", "teacher-1")  # billed to the person acting


@pytest.mark.parametrize(
    ("caller", "purpose"),
    [(c, p) for c in sorted(OWN) for p in Purpose if p != OWN[c]],
)
def test_another_services_purpose_is_forbidden(caller: str, purpose: Purpose) -> None:
    with pytest.raises(ContractError) as e:
        authorize(caller, purpose, None, "teacher-1")
    assert e.value.code == ErrorCode.forbidden
    assert purpose.value in e.value.message


@pytest.mark.parametrize("caller", ["runner", "monitor", "llm-gateway", "nobody"])
def test_a_user_not_in_the_table_may_not_call_at_all(caller: str) -> None:
    with pytest.raises(ContractError) as e:
        authorize(caller, Purpose.generate, None, None)
    assert e.value.code == ErrorCode.forbidden


def test_only_a_purpose_that_bills_someone_else_may_name_another_payer() -> None:
    # The poll bills its teacher for calls no person makes (ADR-071 §12).
    authorize("poll", Purpose.poll, "teacher-9", None)
    for caller in ("editor-assist", "review", "lesson-fix"):
        with pytest.raises(ContractError) as e:
            authorize(caller, OWN[caller], "someone-else", "teacher-1")
        assert e.value.code == ErrorCode.forbidden
        # Scheduled work (user null) may not bill a person either.
        with pytest.raises(ContractError):
            authorize(caller, OWN[caller], "teacher-1", None)


def test_the_operators_plain_subject_may_call_for_any_purpose() -> None:
    for purpose in Purpose:
        authorize(None, purpose, "anyone", None)
