"""The seeded-defect lessons and the scoring of a `quiz-eval lesson-fix` run."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from quiz_lesson_fix.domain.aifix import AI_FIX_CODES
from quiz_lesson_fix.domain.fix import FIX_SCHEMA
from quiz_lesson_fix.eval.cases import load_cases
from quiz_lesson_fix.eval.scoring import CaseResult, run_case, score

# Warnings a seeded lesson may carry besides its defect: shape only, never AI-fixable.
SHAPE = {"W_SECTION_COUNT", "W_QUESTION_SHAPE"}


def test_every_seeded_lesson_holds_exactly_its_planted_defect() -> None:
    cases = load_cases()
    assert len(cases) >= 12
    assert {c.language for c in cases} >= {"en", "fr", "de", "it", "es"}
    assert len({c.defect for c in cases}) == len(cases)
    for case in cases:
        assert case.defect in AI_FIX_CODES, case.name
        checked = case.checked()
        finding = case.finding(checked)
        assert finding.sectionId, case.name
        others = {f.code for f in checked.findings} - {case.defect} - SHAPE
        assert others == set(), case.name


def test_the_score_counts_first_and_second_tries() -> None:
    result = score(
        [
            CaseResult("a", "E_X", "en", 1, 1),
            CaseResult("b", "E_X", "fr", 2, 2),
            CaseResult("c", "E_X", "de", None, 2, ["still there"]),
            CaseResult("d", "E_X", "it", None, 0, error="llm_failed: provider down"),
        ]
    )
    assert (result.cases, result.passed_first, result.passed_second) == (4, 1, 2)
    assert (result.rate_first, result.rate_second) == (0.25, 0.5)
    assert (result.failed, result.errors) == (["c"], ["d"])
    assert score([]).rate_first == 0.0


class Scripted:
    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)

    async def __call__(self, system: str, messages: list[dict[str, str]], schema: Any) -> Any:
        return self.replies.pop(0)


def edit(block_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "blockId": block_id,
        "text": "",
        "words": [],
        "questionType": "",
        "prompt": "",
        "answer": "",
        "answers": [],
        "steps": [],
        **fields,
    }


# The passage's word is "ouvrières", and the orange prompt quotes it: a fix must reword both.
GOOD = {
    "explanation": "x",
    "edits": [
        edit("s1q2", answer="ouvrières"),
        edit("s1q4", prompt="Elles fabriquent ______. Nommez-en un."),
    ],
}
HALF = {"explanation": "x", "edits": [edit("s1q2", answer="ouvrières")]}


@pytest.mark.parametrize(
    ("replies", "passed_at"), [([GOOD], 1), ([HALF, GOOD], 2), ([HALF] * 2, None)]
)
async def test_a_case_runs_through_the_fix(
    replies: list[dict[str, Any]], passed_at: int | None
) -> None:
    case = next(c for c in load_cases() if c.name == "fr_grounding_single")
    result = await run_case(case, Scripted(*replies))
    assert result.passed_at == passed_at
    assert result.attempts == len(replies)


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c.name)
async def test_every_reference_fix_passes_at_the_first_try(case: Any) -> None:
    reply = case.reference_reply()
    jsonschema.validate(reply, FIX_SCHEMA)
    result = await run_case(case, Scripted(reply))
    assert (result.passed_at, result.problems) == (1, [])
