"""categorize parity: the platform's schema, views and merge, case for case.

Cases derived from heig-quiz `packages/qt-categorize/src/schema.test.ts` (the C-types fixture of
`test/fixtures.ts`, duplicate ids, short lowercase ids, unknown cards, a card in two columns,
distractors only, 2..6 columns, `newId`), `server.ts` (toStudent drops the key, shuffles cards
and columns on their own streams), `generate.test.ts` (`mergeCategorize`), and issue 8's list
(each column claimed once, labels cut to 200, cards cut to 500, 30 cards, 8-character ids).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from quiz_contracts.questions import StudentView, question_type, read_draft
from quiz_contracts.questions.categorize import (
    CATEGORIZE_CARD_MAX,
    CATEGORIZE_LABEL_MAX,
    CATEGORIZE_MAX_CARDS,
    CATEGORIZE_MAX_COLUMNS,
    empty_categorize_draft,
    new_id,
)
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed
from quiz_editor_assist.generators.categorize import merge_categorize_proposal

CATEGORIZE = question_type("categorize")
C = {"int": "q7k2", "float": "m3x9", "ptr": "z0p4"}
K = {
    "int": "a81f", "size": "b27c", "double": "c55d", "float": "d09e",
    "voidp": "e44a", "charp": "f13b", "string": "g62c", "bool": "h70d",
}  # fmt: skip


def fixture(**over: Any) -> dict[str, Any]:
    """Three columns, six targets and two distractors: the platform's C-types fixture."""
    return {
        "configVersion": 1,
        "prompt": "Sort each C type by what it represents.",
        "columns": [
            {"id": C["int"], "label": "Integer", "cards": [K["int"], K["size"]]},
            {"id": C["float"], "label": "Floating point", "cards": [K["double"], K["float"]]},
            {"id": C["ptr"], "label": "Pointer", "cards": [K["voidp"], K["charp"]]},
        ],
        "cards": [
            {"id": K["int"], "text": "`int`"},
            {"id": K["size"], "text": "`size_t`"},
            {"id": K["double"], "text": "`double`"},
            {"id": K["float"], "text": "`float`"},
            {"id": K["voidp"], "text": "`void *`"},
            {"id": K["charp"], "text": "`char *`"},
            {"id": K["string"], "text": "`string`"},
            {"id": K["bool"], "text": "`boolean`"},
        ],
        "shuffleCards": False,
        **over,
    }


def issues(config: dict[str, Any]) -> list[str]:
    return [p.message for p in read_draft("categorize", config).problems]


def test_the_fixture_validates_and_defaults_fill() -> None:
    config = read_draft(
        "categorize", {k: v for k, v in fixture().items() if k != "shuffleCards"}
    ).config
    assert config is not None
    wire = config.model_dump(by_alias=True)
    assert (wire["ordered"], wire["shuffleCards"], wire["shuffleColumns"], wire["policy"]) == (
        False,
        True,
        False,
        "inherit",
    )


def test_refusals_name_the_platforms_keys_under_columns() -> None:
    f = fixture()
    dup_column = fixture(columns=[*f["columns"], {**f["columns"][0], "cards": []}])
    assert "categorize.duplicate_id" in issues(dup_column)
    assert "categorize.duplicate_id" in issues(fixture(cards=[*f["cards"], f["cards"][0]]))
    ghost = [{**f["columns"][0], "cards": [*f["columns"][0]["cards"], "ghost"]}, *f["columns"][1:]]
    assert "categorize.unknown_card" in issues(fixture(columns=ghost))
    twice = [
        f["columns"][0],
        {**f["columns"][1], "cards": [*f["columns"][1]["cards"], K["int"]]},
        f["columns"][2],
    ]
    assert "categorize.card_twice" in issues(fixture(columns=twice))
    empty = [{**c, "cards": []} for c in f["columns"]]
    problems = read_draft("categorize", fixture(columns=empty)).problems
    assert ("columns", "categorize.no_target") in [(p.path, p.message) for p in problems]


@pytest.mark.parametrize("bad_id", ["abc", "Abcd", "ab-cd", "ab cd", "x" * 41])
def test_only_short_lowercase_alphanumeric_ids(bad_id: str) -> None:
    f = fixture()
    cards = [{**f["cards"][0], "id": bad_id}, *f["cards"][1:]]
    assert not read_draft("categorize", fixture(cards=cards)).valid


def test_two_to_six_columns_and_the_empty_draft() -> None:
    f = fixture()
    assert issues(fixture(columns=f["columns"][:1]))
    many = [{"id": f"col{i}", "label": f"C{i}", "cards": []} for i in range(7)]
    assert issues(fixture(columns=many))
    draft = empty_categorize_draft()
    assert len(draft["columns"]) == 2 and draft["cards"] == []
    assert all(re.fullmatch(r"[0-9a-z]{8}", c["id"]) for c in draft["columns"])
    assert len({new_id() for _ in range(50)}) == 50


def test_views() -> None:
    config = fixture(shuffleCards=True, shuffleColumns=True)
    student = CATEGORIZE.to_student(config)  # the teacher's preview: the teacher's order
    assert [c["id"] for c in student["columns"]] == list(C.values())
    assert student["columns"][0] == {"id": C["int"], "label": "Integer"}  # no `cards`: the key
    assert student["ordered"] is False and "negativeMarking" not in student
    view = StudentView(
        seed=7, item_id="item-1", shuffle=True, defaults={"categorize": {"negativeMarking": True}}
    )
    shuffled = CATEGORIZE.to_student(config, view)
    cards = [c["id"] for c in shuffled["cards"]]
    assert cards == seeded_shuffle(list(K.values()), stream_seed(7, "item-1", "cards"))
    columns = [c["id"] for c in shuffled["columns"]]
    assert columns == seeded_shuffle(list(C.values()), stream_seed(7, "item-1", "columns"))
    assert shuffled["negativeMarking"] is True
    assert CATEGORIZE.to_solution(config) == {
        "columns": [{"id": c["id"], "cards": c["cards"]} for c in fixture()["columns"]]
    }


# --- the merge (mergeCategorize) --------------------------------------------------------------


def counter() -> Any:
    ids = (f"id{n:06d}" for n in itertools.count())
    return lambda: next(ids)


def shape(config: dict[str, Any]) -> dict[str, Any]:
    """Each column's label with its cards' texts, and the unplaced cards (the platform's)."""
    text = {c["id"]: c["text"] for c in config["cards"]}
    placed = {i for c in config["columns"] for i in c["cards"]}
    return {
        "columns": [[c["label"], [text[i] for i in c["cards"]]] for c in config["columns"]],
        "loose": [c["text"] for c in config["cards"] if c["id"] not in placed],
    }


def col(label: str, *cards: str) -> dict[str, Any]:
    return {"label": label, "cards": list(cards)}


TEACHER = {
    **empty_categorize_draft(),
    "prompt": "Sort.",
    "columns": [
        {"id": "col0aaaa", "label": "Birds", "cards": ["card0aaa"]},
        {"id": "col1aaaa", "label": "", "cards": []},
    ],
    "cards": [{"id": "card0aaa", "text": "Owl"}],
}
MERGES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "names the empty columns of a fresh draft, places the cards": (
        {**empty_categorize_draft(), "prompt": "Sort the animals."},
        {
            "columns": [col("Mammals", "Cat", "Whale"), col("Birds", "Owl"), col("Fish", "Trout")],
            "distractors": ["Rock"],
        },
        {
            "columns": [["Mammals", ["Cat", "Whale"]], ["Birds", ["Owl"]], ["Fish", ["Trout"]]],
            "loose": ["Rock"],
        },
    ),
    "joins the teacher's column of the same label, never adds nor moves a held card": (
        TEACHER,
        {"columns": [col("birds", "owl", "Eagle"), col("Fish", "Owl", "Trout")], "distractors": []},
        {"columns": [["Birds", ["Owl", "Eagle"]], ["Fish", ["Trout"]]], "loose": []},
    ),
    "a second proposed column of the same label makes a new column": (
        TEACHER,
        {"columns": [col("Birds", "Eagle"), col("Birds", "Robin")], "distractors": []},
        {"columns": [["Birds", ["Owl", "Eagle"]], ["Birds", ["Robin"]]], "loose": []},
    ),
    "a blank label skips its column and its cards": (
        TEACHER,
        {"columns": [col("  ", "Lost"), col("Fish", "Trout")], "distractors": ["Stone"]},
        {"columns": [["Birds", ["Owl"]], ["Fish", ["Trout"]]], "loose": ["Stone"]},
    ),
}


@pytest.mark.parametrize(("config", "prop", "expected"), MERGES.values(), ids=MERGES.keys())
def test_merge(config: dict[str, Any], prop: dict[str, Any], expected: dict[str, Any]) -> None:
    merged = merge_categorize_proposal(config, prop, new_id=counter())
    assert shape(merged) == expected
    assert {k: v for k, v in merged.items() if k not in ("columns", "cards")} == {
        k: v for k, v in config.items() if k not in ("columns", "cards")
    }


def test_the_fresh_merge_is_a_valid_config_with_8_character_ids() -> None:
    config, prop, _ = MERGES["names the empty columns of a fresh draft, places the cards"]
    merged = merge_categorize_proposal(config, prop)
    assert read_draft("categorize", merged).valid
    new_ids = [c["id"] for c in merged["cards"]] + [c["id"] for c in merged["columns"][2:]]
    assert all(re.fullmatch(r"[0-9a-z]{8}", i) for i in new_ids)
    merged = merge_categorize_proposal(
        TEACHER,
        MERGES["joins the teacher's column of the same label, never adds nor moves a held card"][1],
    )
    assert merged["columns"][0]["id"] == "col0aaaa"  # the teacher's column, the teacher's id


def test_labels_and_cards_are_cut_not_dropped_and_caps_hold() -> None:
    long_label, long_card = "L" * (CATEGORIZE_LABEL_MAX + 50), "c" * (CATEGORIZE_CARD_MAX + 50)
    merged = merge_categorize_proposal(
        {**empty_categorize_draft(), "prompt": "P"},
        {"columns": [col(long_label, long_card)], "distractors": []},
        new_id=counter(),
    )
    assert shape(merged)["columns"][0] == ["L" * CATEGORIZE_LABEL_MAX, ["c" * CATEGORIZE_CARD_MAX]]
    many = {
        "columns": [col(f"col {i}", *(f"card {i}.{j}" for j in range(10))) for i in range(9)],
        "distractors": ["extra"],
    }
    merged = merge_categorize_proposal(
        {**empty_categorize_draft(), "prompt": "P"}, many, new_id=counter()
    )
    assert len(merged["columns"]) == CATEGORIZE_MAX_COLUMNS
    assert len(merged["cards"]) == CATEGORIZE_MAX_CARDS
    assert read_draft("categorize", merged).valid


@pytest.mark.integration
@pytest.mark.parametrize(
    "case",
    [
        "names the empty columns of a fresh draft, places the cards",
        "a second proposed column of the same label makes a new column",
    ],
)
async def test_merge_through_http(wand: Any, case: str) -> None:
    config, prop, expected = MERGES[case]
    r = await wand.generate("categorize", config, {"proposal": prop, "explanation": ""})
    assert r.status_code == 200, r.text
    assert shape(r.json()["config"]) == expected
