"""rich parity: the platform's schema, views and merge, case for case.

Cases derived from heig-quiz `packages/qt-rich/src/schema.test.ts` (defaults, the limit between
1 and 50,000, the format), `server.ts` (toStudent keeps the limit, drops the rubric and the
model answer), `generate.test.ts` (`mergeRich`), and issue 8 (over-long proposals are cut).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.rich import RICH_MAX_CHARS, RICH_RUBRIC_MAX, empty_rich_draft
from quiz_editor_assist.generators.rich import merge_rich_proposal

RICH = question_type("rich")


def base(**over: Any) -> dict[str, Any]:
    return {"configVersion": 1, "prompt": "Explain why the sky is blue.", **over}


@pytest.mark.parametrize(
    ("max_chars", "valid"),
    [(1, True), (RICH_MAX_CHARS, True), (0, False), (RICH_MAX_CHARS + 1, False), (2.5, False)],
)
def test_the_limit_is_between_1_and_the_hard_cap(max_chars: float, valid: bool) -> None:
    assert read_draft("rich", base(maxChars=max_chars)).valid is valid


def test_defaults_format_and_the_empty_draft() -> None:
    config = read_draft("rich", base()).config
    assert config is not None
    assert config.model_dump(by_alias=True, exclude_none=True) == {
        "configVersion": 1,
        "prompt": "Explain why the sky is blue.",
        "rubric": "",
        "format": "markdown",
    }
    assert read_draft("rich", base(format="plain")).valid
    assert not read_draft("rich", base(format="html")).valid
    assert not read_draft("rich", base(reference="x" * (RICH_MAX_CHARS + 1))).valid
    assert empty_rich_draft() == {
        "configVersion": 1,
        "prompt": "",
        "rubric": "",
        "format": "markdown",
    }


def test_views() -> None:
    config = base(rubric="- Rayleigh (2 pts)", reference="Light scatters.", maxChars=1500)
    assert RICH.to_student(config) == {
        "prompt": "Explain why the sky is blue.",
        "format": "markdown",
        "maxChars": 1500,
    }
    assert RICH.to_solution(config) == {
        "rubric": "- Rayleigh (2 pts)",
        "reference": "Light scatters.",
    }
    assert RICH.to_solution(base()) == {"rubric": ""}


MERGES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "fills an empty model answer and an empty rubric": (
        {**empty_rich_draft(), "prompt": "Why?"},
        {"reference": "Because.", "rubric": "- the cause (2 pts)"},
        {
            **empty_rich_draft(),
            "prompt": "Why?",
            "reference": "Because.",
            "rubric": "- the cause (2 pts)",
        },
    ),
    "never touches what the teacher wrote": (
        {**empty_rich_draft(), "prompt": "Why?", "rubric": "Mine"},
        {"reference": "", "rubric": "Theirs"},
        {**empty_rich_draft(), "prompt": "Why?", "rubric": "Mine"},
    ),
    "proposals are trimmed": (
        {**empty_rich_draft(), "prompt": "Why?"},
        {"reference": "  Because.\n", "rubric": " \n "},
        {**empty_rich_draft(), "prompt": "Why?", "reference": "Because."},
    ),
    "an over-long model answer is cut, not dropped": (
        {**empty_rich_draft(), "prompt": "Why?"},
        {"reference": "r" * (RICH_MAX_CHARS + 10), "rubric": "g" * (RICH_RUBRIC_MAX + 10)},
        {
            **empty_rich_draft(),
            "prompt": "Why?",
            "reference": "r" * RICH_MAX_CHARS,
            "rubric": "g" * RICH_RUBRIC_MAX,
        },
    ),
}


@pytest.mark.parametrize(("config", "prop", "merged"), MERGES.values(), ids=MERGES.keys())
def test_merge(config: dict[str, Any], prop: dict[str, Any], merged: dict[str, Any]) -> None:
    assert merge_rich_proposal(config, prop) == merged


def test_a_cut_never_splits_a_character() -> None:
    # 50,000 UTF-16 units: the cut drops the emoji whose second half would be cut off.
    text = "a" * (RICH_MAX_CHARS - 1) + "😀"
    merged = merge_rich_proposal(base(), {"reference": text, "rubric": ""})
    assert merged["reference"] == "a" * (RICH_MAX_CHARS - 1)
    assert read_draft("rich", merged).valid


@pytest.mark.integration
@pytest.mark.parametrize(
    "case",
    [
        "fills an empty model answer and an empty rubric",
        "an over-long model answer is cut, not dropped",
    ],
)
async def test_merge_through_http(wand: Any, case: str) -> None:
    config, prop, merged = MERGES[case]
    r = await wand.generate("rich", config, {"proposal": prop, "explanation": ""})
    assert r.status_code == 200, r.text
    assert r.json()["config"] == merged
