"""The lesson contracts keep the tool's shapes: what is read is written back unchanged."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from quiz_contracts.errors import ErrorCode, http_status
from quiz_contracts.lesson import (
    CheckReply,
    Finding,
    FixReply,
    FixRequest,
    Lesson,
    ReplaceBlock,
)

STORED = {
    "title": "Bees",
    "sources": [{"id": "atlas", "title": "Atlas", "year": "2020"}],
    "sections": [
        {
            "id": "s1",
            "name": "Hive",
            "blocks": [
                {"id": "t1", "type": "text", "text": "Bees make wax."},
                {
                    "id": "t2",
                    "type": "text",
                    "content": {
                        "type": "doc",
                        "content": [
                            {
                                "type": "paragraph",
                                "content": [
                                    {"type": "text", "text": "Wax", "marks": [{"type": "italic"}]},
                                    {
                                        "type": "footnote",
                                        "attrs": {
                                            "sourceId": "atlas",
                                            "locator": "p. 2",
                                            "note": "",
                                        },
                                    },
                                ],
                            },
                            {"type": "paragraph"},
                        ],
                    },
                },
                {
                    "id": "img",
                    "type": "image",
                    "image": {"hash": "h", "mime": "image/png", "ext": "png"},
                    "width": 300,
                },
                {"id": "sp", "type": "spelling", "words": [{"id": "w1", "text": "swarming"}]},
                {
                    "id": "q1",
                    "type": "question",
                    "questionType": "single",
                    "prompt": "What?",
                    "answer": "wax",
                },
                {
                    "id": "q2",
                    "type": "question",
                    "questionType": "number",
                    "prompt": "How many?",
                    "answer": 12,
                    "steps": [{"id": "st", "text": "3 x 4 = 12"}],
                },
                {
                    "id": "q3",
                    "type": "question",
                    "questionType": "multiple_open",
                    "prompt": "Another word?",
                    "answers": ["sweet", {"id": "a2", "text": "sugary"}],
                },
                {
                    "id": "v",
                    "type": "vakt",
                    "text": "Buzz.",
                    "links": [{"id": "l1", "label": "Song", "url": "https://example.org"}],
                },
            ],
        }
    ],
}


def test_a_stored_lesson_is_written_back_as_it_was_read() -> None:
    lesson = Lesson.model_validate(STORED)
    assert lesson.model_dump(mode="json") == STORED
    assert Lesson.model_validate_json(lesson.model_dump_json()).model_dump() == STORED


def test_unknown_kinds_are_refused() -> None:
    bad_block = {"title": "", "sections": [{"id": "s", "blocks": [{"id": "b", "type": "table"}]}]}
    with pytest.raises(ValidationError):
        Lesson.model_validate(bad_block)
    bad_question = {
        "title": "",
        "sections": [{"blocks": [{"type": "question", "questionType": "riddle", "prompt": "?"}]}],
    }
    with pytest.raises(ValidationError):
        Lesson.model_validate(bad_question)


def test_the_fix_bodies() -> None:
    request = FixRequest.model_validate({"doc": STORED, "findingKey": "E_X:q1", "token": "t"})
    assert (request.findingKey, request.token) == ("E_X:q1", "t")
    reply = FixReply(
        operations=[
            ReplaceBlock.model_validate(
                {
                    "op": "replace_block",
                    "blockId": "q1",
                    "block": {
                        "type": "question",
                        "questionType": "single",
                        "prompt": "What?",
                        "answer": "comb",
                    },
                }
            )
        ],
        explanation="Grounded.",
        newWarnings=0,
    )
    assert reply.model_dump(mode="json") == {
        "operations": [
            {
                "op": "replace_block",
                "blockId": "q1",
                "block": {
                    "type": "question",
                    "questionType": "single",
                    "prompt": "What?",
                    "answer": "comb",
                },
            }
        ],
        "explanation": "Grounded.",
        "newWarnings": 0,
    }
    finding = Finding(
        level="warning",
        code="W_SECTION_COUNT",
        key="W_SECTION_COUNT:1",
        section=None,
        sectionId=None,
        blockId=None,
        itemId=None,
        params={"count": 1, "expected": 6},
        message="m",
    )
    assert CheckReply(errors=[], warnings=[finding]).model_dump()["warnings"][0]["params"] == {
        "count": 1,
        "expected": 6,
    }


def test_the_fix_error_codes_and_statuses() -> None:
    assert [
        http_status(c)
        for c in (
            ErrorCode.finding_gone,
            ErrorCode.no_ai_fix,
            ErrorCode.fix_failed,
            ErrorCode.lesson_too_large,
        )
    ] == [409, 400, 422, 413]
