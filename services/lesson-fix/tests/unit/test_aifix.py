"""The shared half of an AI fix: context, edits to operations, applying them, checkFix.

Cases follow packages/core/src/lessonAiFixes.test.js of Spelling-Creator/spelling-creator;
the lesson is ours.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.aifix import (
    AI_FIX_CODES,
    FixRefused,
    ai_edits_to_operations,
    apply_fix_operations,
    check_fix,
    fix_context,
    has_ai_fix,
)
from quiz_lesson_fix.domain.checks import CHECK_CODES, validate_lesson
from quiz_lesson_fix.domain.patch import PatchError
from quiz_lesson_fix.domain.text import block_markup, parse_markup, text_block

PASSAGE = "A river carries SEDIMENT to the sea.^[@smith, p. 4] It drops boulder, cobble, and silt."


def text(block_id: str, markup: str) -> dict[str, Any]:
    return text_block({"id": block_id, "type": "text"}, parse_markup(markup))


def q(block_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": block_id, "type": "question", "questionType": kind, **fields}


def lesson() -> dict[str, Any]:
    return {
        "title": "Rivers",
        "sources": [{"id": "smith", "title": "Rivers of the World"}],
        "sections": [
            {
                "id": "s1",
                "name": "Rivers",
                "blocks": [
                    text("t1", PASSAGE),
                    {"id": "img", "type": "image", "image": {"hash": "abc", "mime": "image/png"}},
                    {
                        "id": "sp1",
                        "type": "spelling",
                        "words": [{"id": "w1", "text": "stream"}, {"id": "w2", "text": "valley"}],
                    },
                    q(
                        "q1",
                        "single",
                        prompt="What does a river carry to the sea?",
                        answer="gravel",
                    ),
                    q(
                        "q2",
                        "multiple",
                        prompt="It drops ______. Name one.",
                        answers=[
                            {"id": "a1", "text": "boulder"},
                            {"id": "a2", "text": "cobble"},
                            {"id": "a3", "text": "silt"},
                        ],
                    ),
                    {"id": "v1", "type": "vakt", "text": "Stretch.", "links": []},
                ],
            },
            {
                "id": "s2",
                "name": "Seas",
                "blocks": [
                    text("t2", "The sea is deep and salty."),
                    {"id": "sp2", "type": "spelling", "words": [{"id": "w3", "text": "harbour"}]},
                    q("q3", "single", prompt="What is the sea?", answer="salty"),
                    q(
                        "q4",
                        "multiple_open",
                        prompt="Give a word for small stones.",
                        answers=[{"id": "a4", "text": "pebble"}],
                    ),
                    q("q5", "number", prompt="How deep?", answer=12, steps=[]),
                ],
            },
        ],
    }


def grounding(doc: dict[str, Any]) -> Finding:
    return next(
        f
        for f in validate_lesson(doc).errors
        if f.code == "E_GROUNDING_SINGLE" and f.blockId == "q1"
    )


# ---- which findings ---------------------------------------------------------------------------


def test_the_22_codes_of_the_tool_in_its_order() -> None:
    assert len(AI_FIX_CODES) == 22
    assert AI_FIX_CODES[3] == "E_GROUNDING_NUMBER_FILL"
    assert set(AI_FIX_CODES) == {c for c, info in CHECK_CODES.items() if info.fix == "ai"}


def test_has_ai_fix_needs_the_code_and_a_section() -> None:
    def finding(code: str, section_id: str | None) -> Finding:
        return Finding.model_construct(code=code, sectionId=section_id)

    assert has_ai_fix(finding("E_GROUNDING_SINGLE", "s1"))
    assert not has_ai_fix(finding("E_GROUNDING_SINGLE", None))
    assert not has_ai_fix(finding("W_FORMAT_BOLD", "s1"))
    assert not has_ai_fix(finding("E_ORANGE_PARTIAL_LIST", "s1"))
    assert not has_ai_fix(finding("E_UNKNOWN_SOURCE", "s1"))
    assert not has_ai_fix(finding("W_SECTION_COUNT", None))


# ---- fixContext -------------------------------------------------------------------------------


def test_the_context_shows_the_section_as_markup_and_lists_words_used_elsewhere() -> None:
    doc = lesson()
    context = fix_context(doc, grounding(doc))
    assert context is not None
    assert (context.section_number, context.section_name) == (1, "Rivers")
    assert context.blocks[0] == {"id": "t1", "type": "text", "text": PASSAGE, "editable": True}
    assert context.blocks[1] == {"id": "img", "type": "image", "editable": False}
    assert context.blocks[2] == {
        "id": "sp1",
        "type": "spelling",
        "words": ["stream", "valley"],
        "editable": True,
    }
    assert context.blocks[4]["answers"] == ["boulder", "cobble", "silt"]
    assert context.blocks[5] == {"id": "v1", "type": "vakt", "editable": False}
    # q4's "pebble" is a multiple_open suggestion: held to nothing, so not forbidden.
    assert sorted(context.used_elsewhere) == ["12", "harbour", "salty"]


def test_no_context_once_the_section_is_gone() -> None:
    assert fix_context(lesson(), Finding.model_construct(sectionId="gone")) is None


# ---- aiEditsToOperations ------------------------------------------------------------------------

S1 = Finding.model_construct(sectionId="s1")


def test_an_empty_field_keeps_what_was_there() -> None:
    ops = ai_edits_to_operations(
        lesson(),
        S1,
        [
            {
                "blockId": "q1",
                "text": "",
                "words": [],
                "questionType": "",
                "prompt": "",
                "answer": " sediment ",
                "answers": [],
                "steps": [],
            },
        ],
    )
    assert ops == [
        {
            "op": "replace_block",
            "blockId": "q1",
            "block": {
                "type": "question",
                "questionType": "single",
                "prompt": "What does a river carry to the sea?",
                "answer": "sediment",
            },
        }
    ]


def test_a_change_of_kind_moves_the_answer() -> None:
    [to_orange] = ai_edits_to_operations(
        lesson(), S1, [{"blockId": "q1", "questionType": "multiple_open"}]
    )
    assert to_orange["block"]["answers"] == ["gravel"]
    [to_single] = ai_edits_to_operations(
        lesson(), S1, [{"blockId": "q2", "questionType": "single"}]
    )
    assert to_single["block"]["answer"] == "boulder"


def test_texts_and_lists_are_trimmed_and_blanks_dropped() -> None:
    [op] = ai_edits_to_operations(
        lesson(), S1, [{"blockId": "sp1", "words": [" canyon ", "", " "]}]
    )
    assert op["block"] == {"type": "spelling", "words": ["canyon"]}
    [op] = ai_edits_to_operations(lesson(), S1, [{"blockId": "t1", "text": "  New text.  "}])
    assert op["block"] == {"type": "text", "text": "New text."}


def test_an_edit_that_changes_nothing_is_skipped() -> None:
    ops = ai_edits_to_operations(
        lesson(),
        S1,
        [
            {"blockId": "q1", "answer": "gravel"},
            {"blockId": "sp1", "words": ["stream", "canyon"]},
        ],
    )
    assert [op["blockId"] for op in ops] == ["sp1"]


@pytest.mark.parametrize(
    ("edits", "says"),
    [
        ([{"blockId": "q3", "answer": "deep"}], "not in this section"),
        ([{"blockId": "nope", "answer": "deep"}], "not in this section"),
        ([{"answer": "deep"}], "not in this section"),
        (["junk"], "not in this section"),
        ([{"blockId": "img", "text": "x"}], "may not be changed"),
        ([{"blockId": "v1", "text": "x"}], "may not be changed"),
        (
            [{"blockId": "q1", "answer": "sediment"}, {"blockId": "q1", "prompt": "Why?"}],
            "a second time",
        ),
        ([{"blockId": "q1", "answer": "gravel"}], "do not change anything"),
        ([], "do not change anything"),
        (None, "do not change anything"),
    ],
)
def test_refusals(edits: Any, says: str) -> None:
    with pytest.raises(FixRefused, match=says):
        ai_edits_to_operations(lesson(), S1, edits)


def test_a_gone_section_is_refused() -> None:
    with pytest.raises(FixRefused, match="no longer in the lesson"):
        ai_edits_to_operations(lesson(), Finding.model_construct(sectionId="gone"), [])


# ---- applyFixOperations -------------------------------------------------------------------------


def test_untouched_objects_stay_the_same_and_unchanged_items_keep_their_ids() -> None:
    doc = lesson()
    fixed = apply_fix_operations(
        doc,
        [
            {
                "op": "replace_block",
                "blockId": "sp1",
                "block": {"type": "spelling", "words": ["valley", "canyon"]},
            }
        ],
    )
    assert fixed["sections"][1] is doc["sections"][1]
    assert fixed["sources"] is doc["sources"]
    for i in (0, 1, 3, 4, 5):
        assert fixed["sections"][0]["blocks"][i] is doc["sections"][0]["blocks"][i]
    words = fixed["sections"][0]["blocks"][2]["words"]
    assert words[0] == {"id": "w2", "text": "valley"}
    assert words[1]["text"] == "canyon" and words[1]["id"] not in ("w1", "w2")
    assert fixed["sections"][0]["blocks"][2]["id"] == "sp1"
    assert doc["sections"][0]["blocks"][2]["words"][0] == {"id": "w1", "text": "stream"}


def test_a_changed_text_block_is_stored_as_a_document() -> None:
    fixed = apply_fix_operations(
        lesson(),
        [{"op": "replace_block", "blockId": "t2", "block": {"type": "text", "text": "Plain now."}}],
    )
    changed = fixed["sections"][1]["blocks"][0]
    assert changed["content"]["type"] == "doc" and "text" not in changed
    assert changed["id"] == "t2"


def test_only_replace_block_and_only_valid_blocks() -> None:
    with pytest.raises(PatchError, match="only replace blocks"):
        apply_fix_operations(lesson(), [{"op": "remove_block", "blockId": "q1"}])
    with pytest.raises(PatchError, match="non-empty list"):
        apply_fix_operations(lesson(), [])
    with pytest.raises(PatchError, match='no block with id "zz"'):
        apply_fix_operations(
            lesson(),
            [{"op": "replace_block", "blockId": "zz", "block": {"type": "text", "text": "x"}}],
        )
    for bad, says in [
        ({"type": "question", "questionType": "single", "prompt": "Q?"}, '"answer" string'),
        ({"type": "question", "questionType": "single", "prompt": " ", "answer": "a"}, "prompt"),
        ({"type": "question", "questionType": "riddle", "prompt": "Q?"}, "questionType"),
        (
            {"type": "question", "questionType": "multiple", "prompt": "Q?", "answers": [" "]},
            '"answers"',
        ),
        ({"type": "question", "questionType": "number", "prompt": "Q?"}, '"answer"'),
        ({"type": "spelling", "words": []}, '"words"'),
        ({"type": "text"}, '"text" string'),
        ({"type": "image"}, "only build"),
    ]:
        with pytest.raises(PatchError, match=says):
            apply_fix_operations(lesson(), [{"op": "replace_block", "blockId": "q1", "block": bad}])


def test_a_number_answer_is_stored_as_a_string_with_its_steps() -> None:
    fixed = apply_fix_operations(
        lesson(),
        [
            {
                "op": "replace_block",
                "blockId": "q5",
                "block": {
                    "type": "question",
                    "questionType": "number",
                    "prompt": "How deep?",
                    "answer": 14,
                    "steps": ["7 x 2 = 14", " "],
                },
            }
        ],
    )
    number = fixed["sections"][1]["blocks"][4]
    assert number["answer"] == "14"
    assert [s["text"] for s in number["steps"]] == ["7 x 2 = 14"]


# ---- checkFix ----------------------------------------------------------------------------------


def test_a_fix_that_clears_the_finding_and_adds_nothing_passes() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(doc, finding, [{"blockId": "q1", "answer": "sediment"}])
    result = check_fix(doc, ops, finding)
    assert (result.ok, result.problems) == (True, [])
    assert result.doc is not None
    assert result.doc["sections"][0]["blocks"][3]["answer"] == "sediment"


def test_a_fix_that_leaves_the_finding_fails() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(doc, finding, [{"blockId": "q1", "prompt": "What is carried?"}])
    result = check_fix(doc, ops, finding)
    assert not result.ok
    assert result.problems[0].startswith("The problem is still there: ")


def test_a_fix_that_causes_an_error_of_its_own_fails() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(doc, finding, [{"blockId": "q1", "answer": "silt"}])
    result = check_fix(doc, ops, finding)
    assert not result.ok
    assert "E_ANSWER_WORD_REUSED" in [f.code for f in result.new_errors]
    assert any(p.startswith("The fix causes a new problem: ") for p in result.problems)


def test_a_fix_that_swaps_one_ungrounded_answer_for_another_fails() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(doc, finding, [{"blockId": "q1", "answer": "pebbles"}])
    result = check_fix(doc, ops, finding)
    assert not result.ok
    assert [f.code for f in result.new_errors] == ["E_GROUNDING_SINGLE"]


def test_a_fix_that_drops_a_footnote_fails() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(
        doc,
        finding,
        [
            {
                "blockId": "t1",
                "text": "A river carries SEDIMENT and gravel to the sea. "
                "It drops boulder, cobble, and silt.",
            }
        ],
    )
    result = check_fix(doc, ops, finding)
    assert not result.ok
    assert result.problems == [
        "The fix drops a footnote from the passage. Keep every ^[...] "
        "footnote exactly as it was, where it was."
    ]


def test_a_passage_fix_that_keeps_the_footnote_passes() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(
        doc,
        finding,
        [{"blockId": "t1", "text": PASSAGE.replace("SEDIMENT to", "SEDIMENT and gravel to")}],
    )
    result = check_fix(doc, ops, finding)
    assert result.ok, result.problems
    assert result.doc is not None
    assert "^[@smith, p. 4]" in block_markup(result.doc["sections"][0]["blocks"][0])


def test_a_reworded_passage_does_not_answer_for_formatting_it_re_keyed() -> None:
    doc = {
        "title": "T",
        "sections": [
            {
                "id": "s1",
                "name": "Rivers",
                "blocks": [
                    text(
                        "t1", "A river carries SEDIMENT. **The waters never stop moving at all.**"
                    ),
                    q("q1", "single", prompt="What does a river carry?", answer="gravel"),
                ],
            }
        ],
    }
    finding = grounding(doc)
    ops = ai_edits_to_operations(
        doc,
        finding,
        [
            {
                "blockId": "t1",
                "text": "A river carries SEDIMENT and gravel. "
                "**The waters never once stop moving.**",
            }
        ],
    )
    result = check_fix(doc, ops, finding)
    assert (result.ok, result.problems, result.new_warnings) == (True, [], [])
    primed = check_fix(doc, ops, finding, before=validate_lesson(doc))
    assert (primed.ok, primed.problems) == (True, [])


def test_formatting_in_a_section_where_it_did_not_fire_is_new() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(
        doc,
        finding,
        [
            {
                "blockId": "t1",
                "text": PASSAGE.replace(
                    "SEDIMENT to", "SEDIMENT and **the heavy brown river gravel** to"
                ),
            }
        ],
    )
    result = check_fix(doc, ops, finding)
    assert not result.ok
    assert "E_FORMAT_LONG_EMPHASIS" in [f.code for f in result.new_errors]
    assert "W_FORMAT_BOLD" in [f.code for f in result.new_warnings]


def test_new_warnings_are_counted_but_never_block() -> None:
    doc = lesson()
    finding = grounding(doc)
    ops = ai_edits_to_operations(
        doc,
        finding,
        [
            {"blockId": "q1", "answer": "sediment"},
            {"blockId": "q2", "prompt": "Name one thing it drops."},
        ],
    )
    result = check_fix(doc, ops, finding)
    assert result.ok
    assert [f.code for f in result.new_warnings] == ["W_ORANGE_NO_BLANK"]


def test_operations_that_cannot_be_made_fail_with_their_message() -> None:
    doc = lesson()
    result = check_fix(doc, [{"op": "remove_block", "blockId": "q1"}], grounding(doc))
    assert (result.ok, result.doc) == (False, None)
    assert result.problems == ['A fix can only replace blocks, not "remove_block".']
