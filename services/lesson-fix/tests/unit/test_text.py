"""The text model: the two stored shapes, the tiptap document and the markup.

Cases follow packages/core/src/lessonText.test.js of Spelling-Creator/spelling-creator; the
round trips are properties over generated documents.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quiz_lesson_fix.domain.text import (
    Note,
    Run,
    block_markup,
    block_paragraphs,
    footnotes,
    formatted_spans,
    is_plain,
    normalize_document,
    paragraphs_markup,
    paragraphs_plain,
    parse_document,
    parse_markup,
    text_block,
    text_block_document,
    to_document,
)


def text(t: str, *marks: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "text", "text": t}
    if marks:
        node["marks"] = [{"type": m} for m in marks]
    return node


def para(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "paragraph", "content": list(content)}


def doc(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "doc", "content": list(content)}


def note(**attrs: Any) -> dict[str, Any]:
    return {"type": "footnote", "attrs": {"sourceId": None, "locator": "", "note": "", **attrs}}


# ---- the two shapes -------------------------------------------------------------------------


def test_plain_text_is_one_paragraph_per_line() -> None:
    paragraphs = block_paragraphs({"type": "text", "text": "One\r\n\nThree"})
    assert paragraphs == [[Run("One")], [], [Run("Three")]]
    assert paragraphs_plain(paragraphs) == "One\n\nThree"


def test_content_wins_over_text_and_falls_back_when_not_a_document() -> None:
    assert (
        paragraphs_plain(
            block_paragraphs({"type": "text", "text": "old", "content": doc(para(text("new")))})
        )
        == "new"
    )
    assert (
        paragraphs_plain(block_paragraphs({"type": "text", "text": "kept", "content": "junk"}))
        == "kept"
    )


def test_plain_words_leave_marks_and_footnotes_out() -> None:
    block = {
        "type": "text",
        "content": doc(
            para(text("Cats came to "), text("Egypt", "italic"), note(note="n")),
            para(text("Then home.")),
        ),
    }
    assert paragraphs_plain(block_paragraphs(block)) == "Cats came to Egypt\nThen home."


def test_normalising_keeps_words_of_unknown_nodes_merges_runs_and_orders_marks() -> None:
    assert normalize_document(
        doc(
            {"type": "heading", "content": [text("Title")]},
            {
                "type": "bulletList",
                "content": [{"type": "listItem", "content": [para(text("Item"))]}],
            },
            {"type": "image", "attrs": {"src": "x"}},
        )
    ) == doc(para(text("Title")), para(text("Item")))
    assert normalize_document(
        doc(
            para(
                {
                    "type": "text",
                    "text": "a",
                    "marks": [{"type": "underline"}, {"type": "link"}, {"type": "bold"}],
                },
                {"type": "text", "text": "b", "marks": ["bold", {"type": "underline"}]},
                {"type": "hardBreak"},
                text("c\nd"),
            )
        )
    ) == doc(para(text("ab", "bold", "underline"), text(" c d")))
    assert normalize_document(doc()) == {"type": "doc", "content": [{"type": "paragraph"}]}
    assert normalize_document({"type": "paragraph"}) is None
    assert normalize_document("<p>hi</p>") is None


def test_footnotes_are_cleaned_or_dropped() -> None:
    cleaned = normalize_document(
        doc(
            para(
                note(),
                note(sourceId="bad id!", note="  spaced\n out  "),
                note(sourceId="s1", locator=" p. 3 ", extra=1),
                note(sourceId=None, locator="ignored", note="n"),
            )
        )
    )
    assert cleaned is not None
    assert cleaned["content"][0]["content"] == [
        note(note="spaced out"),
        note(sourceId="s1", locator="p. 3"),
        note(note="n"),
    ]


def test_the_smaller_shape_and_the_editor_shape() -> None:
    plain = text_block(
        {"id": "b", "type": "text", "content": doc(para(text("x", "bold")))},
        [[Run("Just words")], []],
    )
    assert plain == {"id": "b", "type": "text", "text": "Just words\n"}
    formatted = text_block({"id": "b", "type": "text", "text": "old"}, [[Run("Bold", ("bold",))]])
    assert formatted == {"id": "b", "type": "text", "content": doc(para(text("Bold", "bold")))}
    always = text_block_document({"id": "b", "type": "text", "text": "old"}, [[Run("Plain")]])
    assert always == {"id": "b", "type": "text", "content": doc(para(text("Plain")))}


# ---- spans ------------------------------------------------------------------------------------


def test_formatted_spans_with_their_marks_and_the_total_length() -> None:
    spans, total = formatted_spans(parse_markup("A **long bold run** and *one*\n<u>two</u>"))
    assert [(s.text, s.marks) for s in spans] == [
        ("long bold run", ("bold",)),
        ("one", ("italic",)),
        ("two", ("underline",)),
    ]
    assert total == len("A long bold run and one") + 3


def test_neighbouring_runs_with_different_marks_are_one_span() -> None:
    spans, _ = formatted_spans(parse_markup("**bold *and italic*** plain"))
    assert [(s.text, s.marks) for s in spans] == [("bold and italic", ("bold", "italic"))]
    spans, total = formatted_spans(parse_markup("Plain"))
    assert (spans, total) == ([], 5)


def test_a_footnote_does_not_end_a_span_and_astral_characters_count_twice() -> None:
    spans, total = formatted_spans(parse_markup("*a^[n]b* 😀"))
    assert [s.text for s in spans] == ["ab"]
    assert total == 2 + 1 + 2


# ---- markup -----------------------------------------------------------------------------------


def test_every_mark_and_footnote_form_parses() -> None:
    paragraphs = parse_markup(
        "**Bold** *it* <u>under</u> x^[A note.]^[@smith]^[@smith, p. 12]"
        "^[@smith, p. 12 | More.]^[@smith | Also.]"
    )
    runs = [n for n in paragraphs[0] if isinstance(n, Run)]
    assert runs == [
        Run("Bold", ("bold",)),
        Run(" "),
        Run("it", ("italic",)),
        Run(" "),
        Run("under", ("underline",)),
        Run(" x"),
    ]
    assert footnotes(paragraphs) == [
        Note(None, "", "A note."),
        Note("smith", "", ""),
        Note("smith", "p. 12", ""),
        Note("smith", "p. 12", "More."),
        Note("smith", "", "Also."),
    ]


def test_unpaired_markers_are_the_characters_they_are() -> None:
    line = "5 * 3 is 15, and ^[ never closes, <u>open"
    paragraphs = parse_markup(line)
    assert is_plain(paragraphs)
    assert paragraphs_plain(paragraphs) == line
    assert parse_markup("a **b** c **d") == [[Run("a "), Run("b", ("bold",)), Run(" c **d")]]
    assert parse_markup("</u>x<u>y<u>z</u>") == [[Run("</u>x<u>y"), Run("z", ("underline",))]]


def test_forgiving_footnotes() -> None:
    # Brackets nest; an invalid id is a note holding what was written; an empty one drops.
    assert footnotes(parse_markup("a^[see [1] and [2]]b")) == [Note(None, "", "see [1] and [2]")]
    assert footnotes(parse_markup("^[@bad id!, p. 2]")) == [Note(None, "", "@bad id!, p. 2")]
    assert footnotes(parse_markup("x^[]^[   ]")) == []
    assert paragraphs_plain(parse_markup("x^[]y")) == "xy"


def test_a_backslash_makes_the_next_character_literal() -> None:
    assert parse_markup(r"2\*3 \^[not a note] \<u>no\</u> a\\b end\\") == [
        [Run("2*3 ^[not a note] <u>no</u> a\\b end\\")]
    ]


def test_one_line_one_paragraph() -> None:
    assert [paragraphs_plain([p]) for p in parse_markup("One\n\n**Three**")] == ["One", "", "Three"]


def test_a_plain_block_prints_escaped() -> None:
    assert block_markup({"type": "text", "text": "2*3 ^[x] <U>y"}) == r"2\*3 \^[x] \<U>y"


def test_content_round_trips_through_markup_escapes_and_all() -> None:
    content = normalize_document(
        doc(
            para(
                text("Stars * and \\ slashes, ^[not a note], <u>not a tag</u> "),
                text("bold ", "bold"),
                text("both", "bold", "italic"),
                text(" under", "underline"),
                note(note="Has [brackets] and | pipes"),
                note(note="@not a citation"),
                note(sourceId="s-1", locator="pp. 3, 5", note="Why."),
            ),
            {"type": "paragraph"},
        )
    )
    assert content is not None
    paragraphs = parse_document(content)
    assert paragraphs is not None
    assert to_document(parse_markup(paragraphs_markup(paragraphs))) == content


# ---- properties -------------------------------------------------------------------------------

_TEXT_ALPHABET = st.sampled_from(list("ab *\\^[]<>/uU|@,.é😀_-"))
_runs = st.builds(
    Run,
    st.text(_TEXT_ALPHABET, min_size=1, max_size=8),
    st.sets(st.sampled_from(["bold", "italic", "underline"])).map(
        lambda marks: tuple(m for m in ("bold", "italic", "underline") if m in marks)
    ),
)
_notes = st.one_of(
    st.builds(Note, st.none(), st.just(""), st.text(_TEXT_ALPHABET, min_size=1, max_size=8)),
    st.builds(
        Note,
        st.sampled_from(["s1", "smith-2", "A_b"]),
        st.text(_TEXT_ALPHABET, max_size=6),
        st.text(_TEXT_ALPHABET, max_size=6),
    ),
)
_paragraphs = st.lists(st.lists(st.one_of(_runs, _notes), max_size=6), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(_paragraphs)
def test_markup_round_trips_every_normalised_document(paragraphs: list[list[Run | Note]]) -> None:
    stored = normalize_document(to_document(paragraphs))
    assert stored is not None
    normalised = parse_document(stored)
    assert normalised is not None
    assert to_document(parse_markup(paragraphs_markup(normalised))) == stored


@settings(max_examples=300, deadline=None)
@given(st.text(_TEXT_ALPHABET, max_size=40))
def test_any_markup_parses_and_prints_to_a_fixed_point(markup: str) -> None:
    once = parse_markup(markup)
    printed = paragraphs_markup(once)
    assert parse_markup(printed) == once
    assert paragraphs_markup(parse_markup(printed)) == printed
