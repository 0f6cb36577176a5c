"""The comparison primitives and the JavaScript semantics the keys depend on.

Cases follow apps/mcp/test/validate.test.js ("normalizeText survives thousands separators,
decimals and punctuation") of Spelling-Creator/spelling-creator.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quiz_lesson_fix.domain.checks import find_list_run, next_list_item
from quiz_lesson_fix.domain.jsval import (
    js_decimal_number,
    js_number_string,
    js_sort_key,
    js_string,
    js_trim,
    utf16_len,
    utf16_prefix,
)
from quiz_lesson_fix.domain.normalise import (
    COMMA_MARK,
    ListPassage,
    Phrases,
    caps_vocabulary,
    contains_phrase,
    is_caps_span,
    list_sentences,
    list_tokens,
    normalize_text,
    numeric_key,
    pair_key,
)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("Fuji is 3,776 m tall.", "FUJI IS 3776 M TALL"),
        ("3776", "3776"),
        ("It rose 112.5 percent.", "IT ROSE 112.5 PERCENT"),
        ("the prisoner's dilemma", "THE PRISONER S DILEMMA"),
        ("  MAGMA.  ", "MAGMA"),
        ("1,234,567 and 1,23", "1234567 AND 1 23"),
        ("Straße", "STRASSE"),
        ("l’été_au-lac", "L ÉTÉ AU LAC"),
        ("cafe\u0301", "CAFE"),  # a combining mark is neither letter nor number
        ("ǰ", "J"),  # upper-cases to J + a combining mark
        ("", ""),
        (None, ""),
        (40.0, "40"),
    ],
)
def test_normalize_text(raw: object, normalised: str) -> None:
    assert normalize_text(raw) == normalised


def test_whole_word_containment() -> None:
    assert contains_phrase("A CAT SAT", "CAT")
    assert not contains_phrase("A CATALOGUE", "CAT")
    assert not contains_phrase("A CAT", "")
    assert contains_phrase("THE PACIFIC OCEAN", "PACIFIC OCEAN")


@given(
    st.lists(st.sampled_from(["A", "B", "AB", "BA", "C", "1.5"]), max_size=400),
    st.lists(st.sampled_from(["A", "B", "AB", "C", "1.5", ""]), max_size=3),
)
def test_the_word_index_agrees_with_the_scan(words: list[str], needle: list[str]) -> None:
    haystack = " ".join(words)
    phrase = " ".join(needle)
    assert (phrase in Phrases(haystack)) == contains_phrase(haystack, phrase)


def test_numeric_keys() -> None:
    assert numeric_key("40.0") == "40"
    assert numeric_key("1,20") == "120"  # every comma goes, as in the tool
    assert numeric_key(" 7 ") == "7"
    assert numeric_key("1e3") == "1000"
    assert numeric_key("0x10") == "0X10"  # not 16: the 0x quirk is not copied
    assert numeric_key("about 12") == "ABOUT 12"
    assert numeric_key("Infinity") == "INFINITY"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (40.0, "40"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e16, "10000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (-2.5, "-2.5"),
        (123.456, "123.456"),
    ],
)
def test_javascript_number_strings(number: float, text: str) -> None:
    assert js_number_string(number) == text


def test_javascript_values() -> None:
    assert js_string(12) == "12"
    assert js_string(12.0) == "12"
    assert js_string(True) == "true"
    assert js_string(None) == "null"
    assert js_string([1, None, "a"]) == "1,,a"
    assert js_trim("\ufeff\u00a0 x \u3000") == "x"
    assert js_decimal_number("") == 0.0
    assert js_decimal_number("1_000") is None
    assert js_decimal_number("nan") is None
    assert utf16_len("a😀") == 3
    assert utf16_prefix("ab😀c", 3) == "ab"
    assert sorted(["\uff5e", "😀"], key=js_sort_key) == ["😀", "\uff5e"]  # UTF-16 order
    assert pair_key("s2", "s10") == "s10|s2"


def test_list_tokens_keep_commas_as_separators() -> None:
    sentence = list_tokens("Rock, gas; and ash cost 3,776 or 1.5")
    assert sentence.tokens == [
        "ROCK",
        COMMA_MARK,
        "GAS",
        COMMA_MARK,
        "AND",
        "ASH",
        "COST",
        "3776",
        "OR",
        "1.5",
    ]
    assert sentence.raw[0] == "Rock"


def test_sentences_split_on_enders_before_space_or_end() -> None:
    sentences = list_sentences("It rose 12.5 m. Then, it fell! Done?")
    assert [s.tokens for s in sentences] == [
        ["IT", "ROSE", "12.5", "M"],
        ["THEN", COMMA_MARK, "IT", "FELL"],
        ["DONE"],
    ]
    # The same as tokenising each sentence on its own.
    for text in ("A, b and c. D; e!", "x.y. z", "\x03 a. b"):
        import re

        parts = [list_tokens(p) for p in re.split(r"[.!?]+(?=\s|$)", text.replace("\x03", " "))]
        assert [s.tokens for s in list_sentences(text)] == [p.tokens for p in parts if p.tokens]


def test_list_runs_and_the_next_item() -> None:
    sentence = list_tokens("It drops boulder, cobble, and silt, and the bed shifts")
    run = find_list_run(sentence.tokens, ["BOULDER", "COBBLE", "SILT"])
    assert run is not None and [t for t, _ in run] == ["BOULDER", "COBBLE", "SILT"]
    assert next_list_item(sentence, run[-1][1]) is None  # a clause, not an item
    partial = find_list_run(sentence.tokens, ["BOULDER", "COBBLE"])
    assert partial is not None
    assert next_list_item(sentence, partial[-1][1]) == "silt"
    assert (
        find_list_run(
            list_tokens("a scale called the VEI, the Hazard Estimate Index").tokens,
            ["SCALE", "INDEX"],
        )
        is None
    )


def test_caps_vocabulary_and_caps_spans() -> None:
    # "SUN'" ends at the boundary before the lower-case s.
    assert caps_vocabulary("The HIVE and the SUN's rays, a T-REX, I am") == {"HIVE", "SUN", "T REX"}
    assert caps_vocabulary("ÉCOLE and ÉTÉ") == {"COLE"}  # JavaScript's ASCII \b
    assert is_caps_span("HIVE")
    assert is_caps_span("SAINT-MALO'S")
    assert not is_caps_span("Hive")
    assert not is_caps_span("A")


@given(
    st.text(st.sampled_from(list("ab AB,;.!?1\n’é")), max_size=80),
    st.lists(st.sampled_from(["A", "B", "AB", "1", "É"]), min_size=1, max_size=3),
)
def test_the_searched_sentences_are_the_tokenised_ones(plain: str, tokens: list[str]) -> None:
    expected = [s for s in list_sentences(plain) if all(t in s.tokens for t in tokens)]
    assert ListPassage(plain).sentences_with_all(tokens) == expected
