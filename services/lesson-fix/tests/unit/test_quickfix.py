"""Quick fixes: each code's operations clear its finding and touch nothing else.

Cases follow packages/core/src/lessonFixes.test.js of Spelling-Creator/spelling-creator.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.lesson import Finding, MoveBlock, ReplaceBlock
from quiz_lesson_fix.domain.checks import CHECK_CODES, validate_lesson
from quiz_lesson_fix.domain.patch import apply_operations
from quiz_lesson_fix.domain.quickfix import QUICK_FIX_CODES, quick_fix_operations
from quiz_lesson_fix.domain.text import block_markup, block_paragraphs, footnotes

from .conftest import block, codes, question, set_markup, standard_lesson

BEES = block(standard_lesson(), "s1t1")["text"]


def finding(doc: dict[str, Any], code: str) -> Finding:
    return next(f for f in validate_lesson(doc).findings if f.code == code)


def fixed(doc: dict[str, Any], code: str) -> dict[str, Any]:
    operations = quick_fix_operations(doc, finding(doc, code))
    assert operations
    return apply_operations(doc, operations)


def test_the_quick_fix_codes_are_the_checkers() -> None:
    assert set(QUICK_FIX_CODES) == {c for c, info in CHECK_CODES.items() if info.fix == "quick"}


def test_bold_comes_off_and_the_rest_stays() -> None:
    doc = standard_lesson()
    set_markup(
        doc, "s1t1", BEES.replace("cell", "**cell**").replace("wax", "*wax*") + "^[@atlas, p. 2]"
    )
    operations = quick_fix_operations(doc, finding(doc, "W_FORMAT_BOLD"))
    assert operations is not None
    assert [ReplaceBlock.model_validate(op).blockId for op in operations] == ["s1t1"]
    after = fixed(doc, "W_FORMAT_BOLD")
    markup = block_markup(block(after, "s1t1"))
    assert "**" not in markup and "*wax*" in markup and markup.endswith("^[@atlas, p. 2]")
    assert "W_FORMAT_BOLD" not in codes(validate_lesson(after).findings)
    assert after["sections"][1] is doc["sections"][1]
    assert block(after, "s1t2") is block(doc, "s1t2")


def test_underline_comes_off() -> None:
    doc = standard_lesson()
    set_markup(doc, "s1t1", BEES.replace("cell", "<u>**cell**</u>"))
    markup = block_markup(block(fixed(doc, "W_FORMAT_UNDERLINE"), "s1t1"))
    assert "<u>" not in markup and "**cell**" in markup


def test_formatted_vocabulary_loses_its_formatting_and_a_title_keeps_it() -> None:
    doc = standard_lesson()
    set_markup(
        doc, "s1t1", BEES.replace("HIVE", "***HIVE***").replace("its own cell", "its own *Cella*")
    )
    markup = block_markup(block(fixed(doc, "W_FORMAT_CAPS"), "s1t1"))
    assert "a HIVE built" in markup and "*Cella*" in markup


def test_heavy_formatting_is_all_removed() -> None:
    doc = standard_lesson()
    set_markup(
        doc,
        "s1t1",
        "A *honeybee* *colony* lives in a **HIVE** built from <u>wax</u>. "
        "The workers bring back nectar, pollen, and water^[n].",
    )
    after = fixed(doc, "E_FORMAT_HEAVY")
    paragraphs = block_paragraphs(block(after, "s1t1"))
    assert block_markup(block(after, "s1t1")) == (
        "A honeybee colony lives in a HIVE built from wax. "
        "The workers bring back nectar, pollen, and water^[n]."
    )
    assert len(footnotes(paragraphs)) == 1


def test_a_long_emphasis_or_italic_loses_only_its_own_mark() -> None:
    doc = standard_lesson()
    set_markup(
        doc,
        "s1t1",
        BEES.replace("each load is stored in", "**each load is stored in**").replace(
            "HIVE", "**HIVE**"
        ),
    )
    markup = block_markup(block(fixed(doc, "E_FORMAT_LONG_EMPHASIS"), "s1t1"))
    assert "each load is stored in its" in markup and "**HIVE**" in markup
    doc = standard_lesson()
    set_markup(
        doc,
        "s1t1",
        BEES.replace("The workers", "*The workers")
        .replace("cell.", "cell.*")
        .replace("wax", "*wax*"),
    )
    markup = block_markup(block(fixed(doc, "E_FORMAT_LONG_ITALIC"), "s1t1"))
    assert "The workers bring" in markup and "*wax*" in markup


def test_vakt_blocks_move_to_the_end_in_their_order() -> None:
    doc = standard_lesson()
    blocks = doc["sections"][0]["blocks"]
    blocks.insert(1, {"id": "v1", "type": "vakt", "text": "Buzz.", "links": []})
    blocks.insert(3, {"id": "v2", "type": "vakt", "text": "Fly.", "links": []})
    operations = quick_fix_operations(doc, finding(doc, "W_VAKT_NOT_LAST"))
    assert operations is not None
    assert all(MoveBlock.model_validate(op).op == "move_block" for op in operations)
    after = fixed(doc, "W_VAKT_NOT_LAST")
    ids = [b["id"] for b in after["sections"][0]["blocks"]]
    assert ids[-2:] == ["v1", "v2"]
    assert ids[:-2] == [b["id"] for b in blocks if b["type"] != "vakt"]
    assert all(a is b for a, b in zip(after["sections"][1:], doc["sections"][1:], strict=True))
    assert "W_VAKT_NOT_LAST" not in codes(validate_lesson(after).findings)


def test_tight_orange_questions_take_the_first_orange_places() -> None:
    doc = standard_lesson()
    loose = question(doc, 0, 6)
    loose.update(
        questionType="multiple_open",
        prompt="Another word for sweet?",
        answers=[{"id": "l1", "text": "sugary"}],
    )
    blocks = doc["sections"][0]["blocks"]
    blocks.insert(8, blocks.pop(9))
    assert [b["id"] for b in blocks[8:10]] == ["s1q7", "s1q6"]
    after = fixed(doc, "W_ORANGE_ORDER")
    assert [b["id"] for b in after["sections"][0]["blocks"][8:10]] == ["s1q6", "s1q7"]
    assert codes(validate_lesson(after).findings) == []


def test_a_partial_list_accepts_the_next_item_and_keeps_the_other_ids() -> None:
    doc = standard_lesson()
    question(doc, 0, 5)["answers"] = [
        {"id": "a1", "text": "nectar"},
        {"id": "a2", "text": "pollen"},
    ]
    after = fixed(doc, "E_ORANGE_PARTIAL_LIST")
    answers = question(after, 0, 5)["answers"]
    assert [a["text"] for a in answers] == ["nectar", "pollen", "water"]
    assert [a["id"] for a in answers[:2]] == ["a1", "a2"]
    assert codes(validate_lesson(after).findings) == []


@pytest.mark.parametrize(
    "code", ["W_FORMAT_BOLD", "W_VAKT_NOT_LAST", "E_ORANGE_PARTIAL_LIST", "W_ORANGE_ORDER"]
)
def test_a_stale_finding_has_nothing_to_do(code: str) -> None:
    stale = Finding.model_construct(
        code=code, sectionId="s1", blockId="s1q6", params={"next": "nectar"}
    )
    assert quick_fix_operations(standard_lesson(), stale) is None
    gone = Finding.model_construct(code=code, sectionId="nope", blockId="x", params={})
    assert quick_fix_operations(standard_lesson(), gone) is None
    assert quick_fix_operations(standard_lesson(), Finding.model_construct(code="E_X")) is None
