"""checkFix's "after" reuses the unchanged sections of the "before": never a different result.

`validate_lesson(fixed, reuse=before)` must equal `validate_lesson(fixed)` finding for finding,
in order, whatever the operations did: one block or several, in one section or two, a block
moved between sections, answers and words chosen to collide across sections.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiz_lesson_fix.domain.checks import CheckResult, validate_lesson
from quiz_lesson_fix.domain.patch import apply_operations
from quiz_lesson_fix.eval.cases import load_cases

_ids = itertools.count()


def make_id() -> str:
    return f"n{next(_ids)}"


def dumped(result: CheckResult) -> list[dict[str, Any]]:
    return [f.model_dump() for f in result.findings]


def blocks_of(doc: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(si, b) for si, s in enumerate(doc["sections"]) for b in s["blocks"]]


def vocabulary(doc: dict[str, Any]) -> list[str]:
    """Words already in the lesson: answers, spelling words, a passage word or two."""
    words: list[str] = []
    for _, b in blocks_of(doc):
        if b["type"] == "spelling":
            words += [w["text"] for w in b["words"]]
        elif b["type"] == "question":
            if b.get("answer"):
                words.append(str(b["answer"]))
            words += [a["text"] for a in b.get("answers") or []]
    return [*words, "HIVE", "*bold words here*", "^[@nowhere]"]


@st.composite
def operation(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    _, block = draw(st.sampled_from(blocks_of(doc)))
    words = vocabulary(doc)
    pick = st.sampled_from(words)
    if draw(st.integers(0, 5)) == 0:
        target = draw(st.sampled_from(doc["sections"]))
        return {"op": "move_block", "blockId": block["id"], "index": 0, "sectionId": target["id"]}
    if block["type"] == "text":
        new: dict[str, Any] = {"type": "text", "text": " ".join(draw(st.lists(pick, max_size=6)))}
    elif block["type"] == "spelling":
        new = {"type": "spelling", "words": draw(st.lists(pick, min_size=1, max_size=5))}
    elif block["type"] == "question":
        kind = draw(st.sampled_from(["single", "multiple", "number", "background", "open"]))
        new = {"type": "question", "questionType": kind, "prompt": " ".join(draw(st.lists(pick)))}
        new["prompt"] = new["prompt"] or "What?"
        if kind in ("multiple",):
            new["answers"] = draw(st.lists(pick, min_size=1, max_size=4))
        elif kind != "open":
            new["answer"] = draw(pick)
    else:
        return {"op": "move_block", "blockId": block["id"], "index": 1}
    return {"op": "replace_block", "blockId": block["id"], "block": new}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_reuse_gives_the_full_result(lesson: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(lesson)
    ops = data.draw(st.lists(operation(doc), min_size=1, max_size=3))
    before = validate_lesson(doc)
    fixed = apply_operations(doc, ops, make_id)
    assert dumped(validate_lesson(fixed, reuse=before)) == dumped(validate_lesson(fixed))
    # Reuse never changes the lesson it read, nor the result it reused.
    assert doc == lesson
    assert dumped(validate_lesson(doc)) == dumped(before)


def spelling(doc: dict[str, Any], section: int) -> list[dict[str, str]]:
    block = next(b for b in doc["sections"][section]["blocks"] if b["type"] == "spelling")
    words: list[dict[str, str]] = block["words"]
    return words


def test_only_the_very_same_section_object_is_reused(lesson: dict[str, Any]) -> None:
    spelling(lesson, 1)[0]["text"] = "bee"  # a finding in section 2
    before = validate_lesson(lesson)
    assert before.errors
    twin = copy.deepcopy(lesson)  # equal, not identical: read again
    spelling(twin, 0)[0]["text"] = "wasp"
    assert dumped(validate_lesson(twin, reuse=before)) == dumped(validate_lesson(twin))
    assert dumped(validate_lesson(twin)) != dumped(before)
    swapped = {**lesson, "sections": list(reversed(lesson["sections"]))}  # moved: read again
    assert dumped(validate_lesson(swapped, reuse=before)) == dumped(validate_lesson(swapped))
    assert dumped(validate_lesson(swapped)) != dumped(before)


def test_each_seeded_reference_fix_checks_the_same_with_and_without_reuse() -> None:
    for case in load_cases():
        before = case.checked()
        edits = case.reference_reply()["edits"]
        ops = [
            {"op": "replace_block", "blockId": e["blockId"], "block": block_input(case, e)}
            for e in edits
        ]
        fixed = apply_operations(case.lesson, ops, make_id)
        assert dumped(validate_lesson(fixed, reuse=before)) == dumped(validate_lesson(fixed))


def block_input(case: Any, edit: dict[str, Any]) -> dict[str, Any]:
    """The edit as an input block (what aiEditsToOperations would build)."""
    from quiz_lesson_fix.domain.aifix import ai_edits_to_operations

    finding = case.finding()
    (op,) = [
        o
        for o in ai_edits_to_operations(case.lesson, finding, [edit])
        if o["blockId"] == edit["blockId"]
    ]
    block: dict[str, Any] = op["block"]
    return block
