"""Drafts are read defensively (D16); the platform's JavaScript text and number rules; budgets.

The golden values of the JavaScript rules (trim, String(number), the seeded shuffle) were
computed with Node on heig-quiz's own `packages/core/src/rng.ts` and frozen here.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateRequest, GenerateResult, draft_hash
from quiz_contracts.pictures import encode_pixels, image_string_issue
from quiz_contracts.questions import (
    QUESTION_TYPES,
    check_draft_size,
    question_type,
    read_draft,
)
from quiz_contracts.questions.common import (
    DRAFT_MAX_DEPTH,
    asset_links,
    js_number_text,
    js_trim,
    measure_draft,
    parameters,
    same_text,
    utf16_cut,
    utf16_len,
)
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed

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
    ["configVersion", "prompt", "mode", "choices", "matchers", "kind", "tests", "template",
     "referenceSolution", "text", "columns", "cards", "image", "target", "maxIdeas", "stimuli",
     "reference", "constraints", "grading"]
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


def test_problems_name_the_field_in_camel_case_without_union_tags() -> None:
    matcher = {"kind": "date", "value": "1789-7-14"}
    reading = read_draft("short", {"configVersion": 3, "prompt": "Date ?", "matchers": [matcher]})
    assert [p.path for p in reading.problems] == ["matchers.0.value"]
    reading = read_draft("code", {"configVersion": 1, "prompt": "P", "language": "c", "tests": {}})
    assert {p.path for p in reading.problems} == {"tests.mode", "tests.cases"}


@pytest.mark.parametrize(
    ("text", "trimmed"),
    [(" \ufeffa\u1680 ", "a"), ("\x1cx\x1c", "\x1cx\x1c"), ("\u3000 b\n", "b"), ("", "")],
)
def test_javascript_trim(text: str, trimmed: str) -> None:
    assert js_trim(text) == trimmed


def test_comparison_form_and_utf16_lengths() -> None:
    assert same_text("  Mont \t Blanc ") == same_text("mont blanc") == "mont blanc"
    assert utf16_len("é😀") == 3
    assert utf16_cut("ab😀", 3) == "ab"  # the pair is never split
    assert utf16_cut("ab😀", 4) == "ab😀"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.1, "0.1"), (1e-7, "1e-7"), (1e21, "1e+21"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e16, "10000000000000000"), (0.00001, "0.00001"), (-2.5e-10, "-2.5e-10"), (100, "100"),
        (100.0, "100"), (1.5e300, "1.5e+300"), (5e-324, "5e-324"),
    ],
)  # fmt: skip
def test_javascript_number_text(number: float, text: str) -> None:
    assert js_number_text(number) == text


@pytest.mark.parametrize(
    ("seed", "item", "purpose", "hashed", "order"),
    [
        (7, "i", "choices", 1805868501, [11, 9, 5, 1, 0, 2, 8, 7, 3, 6, 10, 4]),
        (0, "item-1", "choices", 2271561857, [2, 3, 7, 8, 5, 11, 4, 6, 0, 10, 1, 9]),
        (123456789, "é😀", "cards", 3323792257, [6, 11, 5, 3, 0, 1, 10, 8, 4, 2, 9, 7]),
        (42, "q", "options:0", 1528476057, [7, 2, 4, 11, 1, 6, 9, 8, 5, 10, 3, 0]),
    ],
)
def test_seeded_shuffles_match_the_platforms(
    seed: int, item: str, purpose: str, hashed: int, order: list[int]
) -> None:
    assert stream_seed(seed, item, purpose) == hashed
    assert seeded_shuffle(list(range(12)), hashed) == order


def test_parameters_and_assets() -> None:
    assert parameters("Soit [[a]] et [[b+1]].") == ["a", "b+1"]
    assert asset_links("![fig](asset:img/fig-1.png) et asset:x") == [
        "asset:img/fig-1.png",
        "asset:x",
    ]


def test_the_compact_picture_string() -> None:
    assert encode_pixels([0, 1, None], "bw") == "01x"
    assert image_string_issue("0101", 2, 2, "bw") is None
    assert image_string_issue("010", 2, 2, "bw") == "target_size"
    assert image_string_issue("01x1", 2, 2, "bw") == "target_value"
    assert image_string_issue("0201", 2, 2, "bw") == "target_value"


@pytest.mark.parametrize("name", sorted(QUESTION_TYPES))
def test_every_empty_draft_is_within_its_budget_and_a_huge_one_is_refused(name: str) -> None:
    qtype = question_type(name)
    check_draft_size(name, qtype.empty_draft())
    with pytest.raises(ContractError) as exc:
        check_draft_size(name, {**qtype.empty_draft(), "prompt": "x" * (qtype.budget.text + 1)})
    assert exc.value.code == ErrorCode.limit_exceeded
    size = measure_draft({"a": ["bc", 1]})
    assert (size.text, size.values, size.depth) == (3, 4, 2)


def test_a_draft_nested_deeper_than_any_config_is_refused() -> None:
    deep: Any = "x"
    for _ in range(DRAFT_MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ContractError) as exc:
        check_draft_size("code", {"prompt": "P", "junk": deep})
    assert exc.value.code == ErrorCode.limit_exceeded
    very_deep: Any = "x"
    for _ in range(100_000):  # iterative: no recursion limit is reached
        very_deep = {"k": very_deep}
    assert measure_draft(very_deep).depth == 100_000


def test_draft_hash_is_canonical() -> None:
    assert draft_hash({"b": 1, "a": "é"}, "") == draft_hash({"a": "é", "b": 1}, "")
    assert draft_hash({"a": 1}, "") != draft_hash({"a": 1}, " ")
    request = GenerateRequest.model_validate({"config": {"prompt": "x"}, "explanation": ""})
    assert request.item is None
    result = GenerateResult(config={}, explanation="", draft_hash="h")
    assert result.model_dump()["incomplete"] is None


@pytest.mark.parametrize("name", sorted(QUESTION_TYPES))
def test_a_fresh_draft_reads_as_its_type_and_as_no_other(name: str) -> None:
    """Unfinished is not misread (D16); another type's draft is, by its configVersion at least."""
    fresh = question_type(name).empty_draft()
    assert not read_draft(name, fresh).valid and read_draft(name, fresh).reads_as_type
    for other, qtype in QUESTION_TYPES.items():
        if qtype.config_version != question_type(name).config_version:
            misread = read_draft(other, fresh).misread
            assert "configVersion" in [p.path for p in misread], other


def test_a_value_of_the_wrong_kind_is_misread_and_a_missing_one_is_not() -> None:
    draft = question_type("mcq").empty_draft()
    assert [p.path for p in read_draft("mcq", {**draft, "choices": "oops"}).misread] == ["choices"]
    assert read_draft("mcq", {"prompt": "P"}).reads_as_type
    assert not read_draft("mcq", [1, 2]).reads_as_type
