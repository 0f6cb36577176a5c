"""mcq merge and the per-choice wand (ADR-059 §2)."""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_editor_assist.generators.mcq import McqGenerator, merge_mcq_proposal

GEN = McqGenerator()


def choice(choice_id: str, text: str = "", correct: bool = False) -> dict[str, Any]:
    return {"id": choice_id, "text": text, "correct": correct}


def draft(*choices: dict[str, Any], mode: str = "single") -> dict[str, Any]:
    return {"prompt": "Capitale de la France ?", "mode": mode, "choices": list(choices)}


def proposed(*items: tuple[str, bool]) -> dict[str, Any]:
    return {"choices": [{"text": t, "correct": c} for t, c in items]}


def test_fills_empty_rows_in_place_then_appends() -> None:
    config = draft(choice("a", "Paris", True), choice("b"), choice("x"))
    merged = merge_mcq_proposal(
        config, proposed(("Lyon", False), ("Nice", False), ("Lille", False))
    )
    assert merged["choices"] == [
        choice("a", "Paris", True),
        choice("b", "Lyon"),
        choice("x", "Nice"),
        choice("c1", "Lille"),
    ]
    assert config["choices"][1]["text"] == ""  # the caller's draft is not mutated


def test_twelve_choices_at_most() -> None:
    config = draft(*(choice(f"k{i}", f"C{i}") for i in range(10)))
    merged = merge_mcq_proposal(config, proposed(*((f"P{i}", False) for i in range(5))))
    assert len(merged["choices"]) == 12
    assert [c["text"] for c in merged["choices"][10:]] == ["P0", "P1"]


def test_never_repeats_a_written_choice() -> None:
    config = draft(choice("a", "Paris", True), choice("b", "Lyon"))
    merged = merge_mcq_proposal(
        config, proposed(("  paris ", True), ("LYON", False), ("Nice", False), ("nice", False))
    )
    assert [c["text"] for c in merged["choices"]] == ["Paris", "Lyon", "Nice"]


def test_single_mode_keeps_the_teachers_tick_and_demotes_a_second_key() -> None:
    config = draft(choice("a", "Paris", True), choice("b"))
    merged = merge_mcq_proposal(config, proposed(("Marseille", True), ("Lyon", False)))
    assert merged["choices"][0] == choice("a", "Paris", True)
    assert merged["choices"][1] == choice("b", "Marseille", False)  # a distractor now
    assert sum(c["correct"] for c in merged["choices"]) == 1


def test_single_mode_without_a_tick_takes_the_first_proposed_key_only() -> None:
    merged = merge_mcq_proposal(draft(), proposed(("Paris", True), ("Lyon", True), ("Nice", False)))
    assert [(c["text"], c["correct"]) for c in merged["choices"]] == [
        ("Paris", True),
        ("Lyon", False),
        ("Nice", False),
    ]


def test_multiple_mode_keeps_every_proposed_key() -> None:
    config = draft(choice("a", "2", True), mode="multiple")
    merged = merge_mcq_proposal(config, proposed(("4", True), ("3", False)))
    assert [c["correct"] for c in merged["choices"]] == [True, True, False]


def test_a_ticked_row_without_text_is_not_an_empty_row() -> None:
    config = draft(choice("a", "", True), choice("b"))
    merged = merge_mcq_proposal(config, proposed(("Lyon", False)))
    assert merged["choices"][0] == choice("a", "", True)
    assert merged["choices"][1] == choice("b", "Lyon")


def test_a_proposal_cannot_rewrite_the_statement_nor_the_settings() -> None:
    config = draft(choice("a", "Paris", True)) | {"shuffle": False}
    hostile = proposed(("Lyon", False)) | {
        "prompt": "HACKED",
        "mode": "multiple",
        "shuffle": True,
        "choices": [{"id": "a", "text": "Lyon", "correct": True}],
    }
    merged = merge_mcq_proposal(config, hostile)
    assert merged["prompt"] == "Capitale de la France ?"
    assert merged["mode"] == "single"
    assert merged["shuffle"] is False
    assert merged["choices"][0] == choice("a", "Paris", True)
    assert merged["choices"][1] == choice("c1", "Lyon", False)  # the id is the merge's


def test_item_fills_one_empty_row() -> None:
    config = draft(choice("a", "Paris", True), choice("b"), choice("c"))
    call = GEN.item(config, 2)
    merged = call.merge(config, {"text": "Lyon", "correct": True})
    assert merged["choices"] == [choice("a", "Paris", True), choice("b"), choice("c", "Lyon")]
    assert set(call.schema.model_json_schema()["properties"]) == {"text", "correct"}


def test_item_on_a_written_row_is_item_not_empty() -> None:
    config = draft(choice("a", "Paris", True), choice("b"))
    for index in (0, 5):
        with pytest.raises(ContractError) as exc:
            GEN.item(config, index)
        assert exc.value.code == ErrorCode.item_not_empty


def test_item_never_repeats_a_choice() -> None:
    config = draft(choice("a", "Paris", True), choice("b"))
    merged = GEN.item(config, 1).merge(config, {"text": "PARIS", "correct": False})
    assert merged == config
