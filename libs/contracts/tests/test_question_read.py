"""Drafts are read defensively (D16); the config models' rules; the code template format."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateRequest, GenerateResult, draft_hash
from quiz_contracts.questions import QUESTION_TYPES, question_type, read_draft
from quiz_contracts.questions.cloze import blank_answers
from quiz_contracts.questions.code import assemble, reference_regions, template_regions
from quiz_contracts.questions.common import asset_links, parameters
from quiz_contracts.questions.short import read_value

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=25,
)
field_names = st.sampled_from(
    ["prompt", "mode", "choices", "matchers", "kind", "cases", "template", "reference", "text",
     "columns", "cards", "width", "target", "max_ideas", "expected", "zones", "image", "id"]
)  # fmt: skip
drafts = st.dictionaries(field_names, json_values, max_size=8) | json_values


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(QUESTION_TYPES)), raw=drafts)
def test_read_draft_never_raises_on_garbage(name: str, raw: Any) -> None:
    reading = read_draft(name, raw)
    assert reading.valid == (reading.config is not None)
    assert reading.valid or reading.problems


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(QUESTION_TYPES)), raw=drafts)
def test_views_of_garbage_raise_only_draft_invalid(name: str, raw: Any) -> None:
    qtype = question_type(name)
    if not isinstance(raw, dict):
        raw = {"garbage": raw}
    try:
        qtype.to_student(raw)
    except ContractError as exc:
        assert exc.code == ErrorCode.draft_invalid


def test_unknown_type_is_invalid_request() -> None:
    with pytest.raises(ContractError) as exc:
        read_draft("essay", {})
    assert exc.value.code == ErrorCode.invalid_request


def test_problems_name_the_field() -> None:
    matcher = {"id": "m1", "kind": "date", "value": "1789-7-14"}
    reading = read_draft("short", {"prompt": "Date ?", "kind": "date", "matchers": [matcher]})
    assert not reading.valid
    assert reading.problems[0].path == "matchers.0"


def _choice(choice_id: str, text: str, correct: bool = False) -> dict[str, Any]:
    return {"id": choice_id, "text": text, "correct": correct}


@pytest.mark.parametrize(
    ("config", "valid"),
    [
        ({"prompt": "Q", "choices": [_choice("a", "A", True), _choice("b", "B")]}, True),
        ({"prompt": "Q", "choices": [_choice("a", "A", True), _choice("b", "B", True)]}, False),
        (
            {
                "prompt": "Q",
                "mode": "multiple",
                "choices": [_choice("a", "A", True), _choice("b", "B", True)],
            },
            True,
        ),
        ({"prompt": "Q", "choices": [_choice("a", "A", True), _choice("a", "B")]}, False),
        ({"prompt": "Q", "choices": [_choice("a", "A", True), _choice("b", " a ")]}, False),
        ({"prompt": "  ", "choices": [_choice("a", "A", True), _choice("b", "B")]}, False),
        ({"prompt": "Q", "choices": [_choice("a", "A", True), _choice("b", "")]}, False),
    ],
)
def test_mcq_rules(config: dict[str, Any], valid: bool) -> None:
    assert read_draft("mcq", config).valid is valid


@pytest.mark.parametrize(
    ("kind", "value", "read"),
    [
        ("date", "1789-07-14", "1789-07-14"),
        ("date", "14/07/1789", None),
        ("date", "1789-02-30", None),
        ("number", "3,14", "3.14"),
        ("number", "-2e3", "-2e3"),
        ("number", "abc", None),
        ("number", "[[a+b]]", "[[a+b]]"),
        ("text", "  Paris ", "Paris"),
        ("text", "   ", None),
        ("text", 5, None),
    ],
)
def test_short_values_read_as_their_kind(kind: str, value: Any, read: str | None) -> None:
    assert read_value(kind, value) == read


def test_code_template_regions_and_the_next_cut() -> None:
    template = "def f(x):\n    @@edit\n\ndef g():\n    @@edit\n"
    assert template_regions(template) == 2
    assert reference_regions(template, "return x") is None
    regions = reference_regions(template, "y = x\nreturn y\n@@next\nreturn 1")
    assert regions == ["y = x\nreturn y", "return 1"]
    assert assemble(template, regions) == (
        "def f(x):\n    y = x\n    return y\n\ndef g():\n    return 1\n"
    )
    assert template_regions("") == 1
    assert reference_regions("", "print(1)") == ["print(1)"]


def test_code_reference_must_fit_the_template() -> None:
    base = {"prompt": "P", "language": "python", "cases": [{"name": "a"}]}
    assert (
        read_draft("code", {**base, "template": "@@edit\n@@edit", "reference": "x"}).valid is False
    )
    assert read_draft(
        "code", {**base, "template": "@@edit\n@@edit", "reference": "x\n@@next\ny"}
    ).valid
    assert read_draft("code", {**base, "language": "cobol", "reference": "x"}).valid is False


def test_cloze_blanks_and_parameters_and_assets() -> None:
    assert blank_answers("{{a|b}} et {{ [[x+1]] }}") == [["a", "b"], ["[[x+1]]"]]
    student = question_type("cloze").to_student({"text": "A {{a|b}} B {{c}}"})
    assert student == {"text": "A {{1}} B {{2}}", "blanks": 2}
    assert parameters("Soit [[a]] et [[b+1]].") == ["a", "b+1"]
    assert asset_links("![fig](asset:img/fig-1.png) et asset:x") == [
        "asset:img/fig-1.png",
        "asset:x",
    ]


def test_brainstorm_max_ideas_bounds() -> None:
    assert read_draft("brainstorm", {"prompt": "P"}).config.max_ideas == 5  # type: ignore[union-attr]
    assert not read_draft("brainstorm", {"prompt": "P", "max_ideas": 11}).valid
    assert not read_draft("brainstorm", {"prompt": "P", "max_ideas": 0}).valid


def test_draft_hash_is_canonical() -> None:
    assert draft_hash({"b": 1, "a": "é"}, "") == draft_hash({"a": "é", "b": 1}, "")
    assert draft_hash({"a": 1}, "") != draft_hash({"a": 1}, " ")
    request = GenerateRequest.model_validate({"config": {"prompt": "x"}, "explanation": ""})
    assert request.item is None
    result = GenerateResult(config={}, explanation="", draft_hash="h")
    assert result.model_dump()["incomplete"] is None
