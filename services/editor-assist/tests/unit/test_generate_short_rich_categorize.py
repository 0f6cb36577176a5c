"""short, rich and categorize merges (ADR-059 §2)."""

from __future__ import annotations

from typing import Any

from quiz_contracts.questions import read_draft
from quiz_editor_assist.generators.categorize import merge_categorize_proposal
from quiz_editor_assist.generators.rich import merge_rich_proposal
from quiz_editor_assist.generators.short import merge_short_proposal

# --- short -------------------------------------------------------------------------------------


def short(kind: str, *matchers: dict[str, Any]) -> dict[str, Any]:
    return {"prompt": "Réponse ?", "kind": kind, "matchers": list(matchers)}


def test_short_drops_the_empty_placeholder_and_makes_matchers_of_the_kind() -> None:
    config = short("text", {"id": "m1", "kind": "text", "value": ""})
    merged = merge_short_proposal(config, {"values": ["Paris", "Lutèce"], "kind": "number"})
    assert merged["matchers"] == [
        {"id": "m2", "kind": "text", "value": "Paris"},
        {"id": "m3", "kind": "text", "value": "Lutèce"},
    ]
    assert read_draft("short", merged).valid


def test_short_keeps_the_teachers_matchers_and_repeats_none() -> None:
    teacher = {"id": "m1", "kind": "text", "value": "Paris", "case_sensitive": True}
    merged = merge_short_proposal(
        short("text", teacher), {"values": ["paris", " PARIS ", "Lutèce"]}
    )
    assert merged["matchers"] == [teacher, {"id": "m2", "kind": "text", "value": "Lutèce"}]


def test_short_drops_a_date_that_is_not_iso() -> None:
    merged = merge_short_proposal(
        short("date"), {"values": ["14/07/1789", "1789-07-14", "1789-02-30", "juillet"]}
    )
    assert merged["matchers"] == [{"id": "m1", "kind": "date", "value": "1789-07-14"}]


def test_short_numbers_read_as_numbers() -> None:
    teacher = {"id": "m1", "kind": "number", "value": "3.14"}
    merged = merge_short_proposal(
        short("number", teacher), {"values": ["3,14", "3.140", "22/7", "6.28", "[[2*a]]"]}
    )
    assert [m["value"] for m in merged["matchers"]] == ["3.14", "6.28", "[[2*a]]"]


def test_short_with_a_garbage_kind_reads_values_as_text() -> None:
    merged = merge_short_proposal({"prompt": "Q", "kind": "colour"}, {"values": ["bleu"]})
    assert merged["matchers"] == [{"id": "m1", "kind": "text", "value": "bleu"}]
    assert merged["kind"] == "colour"


# --- rich --------------------------------------------------------------------------------------


def test_rich_writes_reference_and_rubric_only_where_empty() -> None:
    proposal = {"reference": "Modèle", "rubric": "- 2 pts", "prompt": "HACKED", "max_words": 5}
    merged = merge_rich_proposal({"prompt": "Discutez.", "rubric": "Mon barème"}, proposal)
    assert merged == {"prompt": "Discutez.", "rubric": "Mon barème", "reference": "Modèle"}
    merged = merge_rich_proposal({"prompt": "D", "reference": " ", "rubric": None}, proposal)
    assert merged == {"prompt": "D", "reference": "Modèle", "rubric": "- 2 pts"}


# --- categorize --------------------------------------------------------------------------------


def cat(columns: list[dict[str, Any]], cards: list[dict[str, Any]]) -> dict[str, Any]:
    return {"prompt": "Triez.", "columns": columns, "cards": cards}


def test_categorize_joins_a_column_by_label() -> None:
    config = cat([{"id": "k", "label": "Fruits"}], [{"id": "a", "text": "Pomme", "column_id": "k"}])
    merged = merge_categorize_proposal(
        config, {"columns": [{"label": " fruits", "cards": ["Poire"]}]}
    )
    assert merged["columns"] == [{"id": "k", "label": "Fruits"}]
    assert merged["cards"][1] == {"id": "k1", "text": "Poire", "column_id": "k"}


def test_categorize_takes_an_unlabelled_column_else_adds_six_at_most() -> None:
    config = cat([{"id": "k", "label": "A"}, {"id": "u", "label": ""}], [])
    labels = ["B", "C", "D", "E", "F", "G"]
    merged = merge_categorize_proposal(
        config, {"columns": [{"label": x, "cards": [f"card {x}"]} for x in labels]}
    )
    assert merged["columns"] == [
        {"id": "k", "label": "A"},
        {"id": "u", "label": "B"},
        {"id": "col1", "label": "C"},
        {"id": "col2", "label": "D"},
        {"id": "col3", "label": "E"},
        {"id": "col4", "label": "F"},
    ]
    # G found no room: its cards are not added anywhere.
    assert [c["text"] for c in merged["cards"]] == [f"card {x}" for x in "BCDEF"]
    assert merged["cards"][0]["column_id"] == "u"


def test_categorize_never_adds_again_nor_moves_a_card_the_draft_holds() -> None:
    pomme = {"id": "a", "text": "Pomme", "column_id": "k1"}
    config = cat([{"id": "k1", "label": "Fruits"}, {"id": "k2", "label": "Légumes"}], [pomme])
    merged = merge_categorize_proposal(
        config,
        {
            "columns": [{"label": "Légumes", "cards": ["pomme", "Poireau", "Poireau"]}],
            "distractors": ["POMME", "Caillou"],
        },
    )
    assert merged["cards"] == [
        pomme,
        {"id": "k1", "text": "Poireau", "column_id": "k2"},
        {"id": "k2", "text": "Caillou", "column_id": None},
    ]


def test_categorize_ids_are_the_merges_and_distractors_have_no_column() -> None:
    proposal = {
        "columns": [{"id": "evil", "label": "X", "cards": [{"id": "c", "text": "t"}, "Un"]}],
        "distractors": ["Deux"],
        "cards": [{"id": "zz", "text": "Trois", "column_id": "evil"}],
    }
    merged = merge_categorize_proposal({"prompt": "Triez."}, proposal)
    assert merged["columns"] == [{"id": "col1", "label": "X"}]
    assert merged["cards"] == [
        {"id": "k1", "text": "Un", "column_id": "col1"},
        {"id": "k2", "text": "Deux", "column_id": None},
    ]
    assert read_draft("categorize", merged).valid


def test_categorize_fills_empty_card_rows_in_place() -> None:
    config = cat([{"id": "k", "label": "Fruits"}], [{"id": "e", "text": "", "column_id": None}])
    merged = merge_categorize_proposal(
        config, {"columns": [{"label": "Fruits", "cards": ["Kiwi"]}]}
    )
    assert merged["cards"] == [{"id": "e", "text": "Kiwi", "column_id": "k"}]
