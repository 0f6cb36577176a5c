"""diagram parity: the platform's schema, scene bounds and views; the wand has none.

Cases derived from heig-quiz `packages/qt-diagram/src/schema.test.ts` (the rubric's default, an
unknown kind, a draft without a reference, the empty draft, the scene's limits: text, control
characters, dangling links, strict objects) and `server.ts` (the student gets the prompt, the
kind and the starter; the reference and the rubric never leave).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.diagram import MAX_TEXT, empty_diagram_draft

DIAGRAM = question_type("diagram")
REFERENCE = {
    "nodes": [
        {"id": "book0001", "t": "class", "x": 0, "y": 0, "name": "Book", "body": ["title: String"]},
        {"id": "auth0001", "t": "class", "x": 200, "y": 0, "name": "Author", "abstract": True},
    ],
    "links": [
        {
            "id": "link0001",
            "type": "assoc",
            "a": "book0001",
            "b": "auth0001",
            "ma": "*",
            "mb": "1..*",
        }
    ],
}


def config(**over: Any) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Draw a library.",
        "kind": "class",
        "reference": REFERENCE,
        "rubric": "Two classes, one association.",
        **over,
    }


def test_config_rules_and_the_empty_draft() -> None:
    no_rubric = {k: v for k, v in config().items() if k != "rubric"}
    parsed = read_draft("diagram", no_rubric).config
    assert parsed is not None and parsed.model_dump(by_alias=True)["rubric"] == ""
    assert not read_draft("diagram", config(kind="drawing")).valid
    assert not read_draft("diagram", config(prompt="")).valid
    assert read_draft("diagram", {**empty_diagram_draft(), "prompt": "x"}).valid
    assert empty_diagram_draft() == {
        "configVersion": 1,
        "prompt": "",
        "kind": "class",
        "reference": {"nodes": [], "links": []},
        "rubric": "",
    }


def scene_keys(scene: dict[str, Any]) -> list[str]:
    return [p.message for p in read_draft("diagram", config(reference=scene)).problems]


def test_the_scene_limits() -> None:
    long = "x" * 200
    nodes = [
        {"id": f"n{i:04d}", "t": "class", "x": 0, "y": 0, "body": [long] * 40} for i in range(80)
    ]
    assert 80 * 40 * 200 > MAX_TEXT
    assert "diagram.too_much_text" in scene_keys({"nodes": nodes, "links": []})
    forged = {
        "nodes": [{"id": "abcd1234", "t": "class", "x": 0, "y": 0, "name": "A\nclass B"}],
        "links": [],
    }
    assert not read_draft("diagram", config(reference=forged)).valid
    dangling = {
        "nodes": [],
        "links": [{"id": "abcd1234", "type": "assoc", "a": "zzzz0000", "b": "yyyy0000"}],
    }
    assert "diagram.dangling_link" in scene_keys(dangling)
    assert not read_draft(
        "diagram", config(reference={**REFERENCE, "text": "class A"})
    ).valid  # strict
    twice = {"nodes": [REFERENCE["nodes"][0], REFERENCE["nodes"][0]], "links": []}
    assert "diagram.duplicate_id" in scene_keys(twice)
    stereo_on_state = {
        "nodes": [{"id": "s0000001", "t": "state", "x": 0, "y": 0, "stereo": "x"}],
        "links": [],
    }
    assert "diagram.field_type" in scene_keys(stereo_on_state)


def test_views() -> None:
    starter = {"nodes": [REFERENCE["nodes"][0]], "links": []}
    student = DIAGRAM.to_student(config(starter=starter))
    assert student == {"prompt": "Draw a library.", "kind": "class", "starter": starter}
    assert "starter" not in DIAGRAM.to_student(config())
    assert DIAGRAM.to_solution(config()) == {
        "reference": REFERENCE,
        "rubric": "Two classes, one association.",
    }


@pytest.mark.integration
async def test_the_wand_is_unsupported_through_http(wand: Any) -> None:
    r = await wand.generate("diagram", config())
    assert (r.status_code, r.json()["code"]) == (422, "generate_unsupported")
