"""The registry-wide leak test: no key reaches a student view (invariant 4, ADR-071 §1)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from quiz_contracts.questions import QUESTION_TYPES, STAFF_ONLY_KEYS, question_type
from quiz_contracts.questions.common import keys_in

SECRET = "S3CRET-7f1c"


def leaks(view: Any, forbidden: frozenset[str], secret: str | None = None) -> list[str]:
    """What in a student view betrays the key: a forbidden key, or the planted secret."""
    found = sorted(keys_in(view) & forbidden)
    if secret is not None and secret in json.dumps(view, ensure_ascii=False):
        found.append(f"secret {secret!r}")
    return found


# One config per keyed type with SECRET planted in every key field that holds text.
def _mcq(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Capitale de la France ?",
        "mode": "single",
        "choices": [
            {"id": "c1", "text": "Paris", "correct": True},
            {"id": "c2", "text": "Lyon", "correct": False},
        ],
    }


def _short(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Mot de passe ?",
        "kind": "text",
        "matchers": [
            {"id": "m1", "kind": "text", "value": secret},
            {"id": "m2", "kind": "text", "value": f"{secret}-bis", "case_sensitive": True},
        ],
    }


def _rich(secret: str) -> dict[str, Any]:
    return {"prompt": "Discutez.", "reference": secret, "rubric": f"- {secret}"}


def _categorize(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Triez.",
        "columns": [{"id": "k1", "label": "Fruits"}, {"id": "k2", "label": "Légumes"}],
        "cards": [
            {"id": "a", "text": "Pomme", "column_id": "k1"},
            {"id": "b", "text": "Poireau", "column_id": "k2"},
            {"id": "c", "text": "Caillou", "column_id": None},
        ],
    }


def _code(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Affichez le mot.",
        "language": "python",
        "template": "def main():\n    @@edit\nmain()",
        "reference": f"print({secret!r})",
        "cases": [
            {"name": "visible", "stdin": "1", "visible": True, "expected_stdout": "ok\n"},
            {
                "name": "hidden",
                "stdin": secret,
                "args": [secret],
                "visible": False,
                "expected_stdout": secret,
                "expected_exit_code": 3,
            },
        ],
    }


def _codeimage(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Dessinez un carré.",
        "language": "python",
        "reference": f"# {secret}\nprint('P3 2 2 255')",
        "width": 2,
        "height": 2,
    }


def _cloze(secret: str) -> dict[str, Any]:
    return {"text": f"La capitale est {{{{{secret}|{secret}-alt}}}}. Et {{{{{secret}2}}}}."}


def _circuit(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Construisez un ET.",
        "inputs": ["A", "B"],
        "outputs": ["S"],
        "gates": ["and", "or", "not"],
        "expected": {"S": "0001"},
        "reference": {
            "nodes": [
                {"id": "n1", "kind": "input", "label": "A"},
                {"id": "n2", "kind": "input", "label": "B"},
                {"id": "n3", "kind": "gate", "gate": "and", "label": secret},
                {"id": "n4", "kind": "output", "label": "S"},
            ],
            "wires": [
                {"id": "w1", "source": "n1", "target": "n3"},
                {"id": "w2", "source": "n2", "target": "n3"},
                {"id": "w3", "source": "n3", "target": "n4"},
            ],
        },
    }


def _diagram(secret: str) -> dict[str, Any]:
    return {
        "prompt": "Placez les étiquettes. ![](asset:heart.png)",
        "image": "asset:heart.png",
        "zones": [
            {"id": "z1", "x": 10, "y": 10, "width": 20, "height": 10, "label": "Aorte"},
            {"id": "z2", "x": 50, "y": 60, "width": 20, "height": 10, "label": "Ventricule"},
        ],
        "distractors": ["Rein"],
    }


PLANTED: dict[str, Callable[[str], dict[str, Any]]] = {
    "mcq": _mcq,
    "short": _short,
    "rich": _rich,
    "categorize": _categorize,
    "code": _code,
    "codeimage": _codeimage,
    "cloze": _cloze,
    "circuit": _circuit,
    "diagram": _diagram,
}

# Types whose key is a text the fixture could plant SECRET into.
TEXT_KEYED = {"short", "rich", "code", "codeimage", "cloze", "circuit"}


def _key_variants(name: str) -> list[dict[str, Any]]:
    """Configs of a type that differ ONLY in their key: a student view must not tell them apart."""
    base = PLANTED[name](SECRET)
    variants = [base]
    other = copy.deepcopy(base)
    if name == "mcq":
        other["choices"][0]["correct"], other["choices"][1]["correct"] = False, True
    elif name == "short":
        other["matchers"] = [{"id": "m9", "kind": "text", "value": "autre"}]
    elif name == "rich":
        other["reference"], other["rubric"] = "x", ""
    elif name == "categorize":
        for card, column in zip(other["cards"], ["k2", None, "k1"], strict=True):
            card["column_id"] = column
    elif name == "code":
        other["reference"] = "print(0)"
        other["cases"][1].update(stdin="z", args=[], expected_stdout="", expected_exit_code=0)
    elif name == "codeimage":
        other["reference"] = "print(1)"
    elif name == "cloze":
        other["text"] = "La capitale est {{Paris}}. Et {{x|y|z}}."
    elif name == "circuit":
        other["expected"] = {"S": "0111"}
        other["reference"] = None
    elif name == "diagram":
        zones = other["zones"]
        zones[0]["label"], zones[1]["label"] = "Ventricule", "Rein"
        other["distractors"] = ["Aorte"]
    variants.append(other)
    return variants


def test_every_type_has_a_leak_fixture() -> None:
    assert set(PLANTED) | {"brainstorm"} == set(QUESTION_TYPES)
    assert {n for n, t in QUESTION_TYPES.items() if not t.has_key} == {"brainstorm"}


def test_only_mcq_short_and_cloze_take_variables() -> None:
    takes = {n for n, t in QUESTION_TYPES.items() if t.takes_variables}
    assert takes == {"mcq", "short", "cloze"}  # ADR-056


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_to_student_never_holds_the_key(name: str) -> None:
    qtype = question_type(name)
    config = PLANTED[name](SECRET)
    student = qtype.to_student(config)
    assert leaks(student, qtype.forbidden_student_keys, SECRET) == []
    assert qtype.forbidden_student_keys >= STAFF_ONLY_KEYS
    solution = qtype.to_solution(config)
    assert solution is not None
    if name in TEXT_KEYED:
        # The secret was planted in a key field: the solution carries it, the student view not.
        assert SECRET in json.dumps(solution, ensure_ascii=False)


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_student_view_is_the_same_whatever_the_key(name: str) -> None:
    qtype = question_type(name)
    views = [qtype.to_student(v) for v in _key_variants(name)]
    solutions = [qtype.to_solution(v) for v in _key_variants(name)]
    assert views[0] == views[1]
    assert solutions[0] != solutions[1]


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_serving_the_whole_config_would_be_caught(name: str) -> None:
    """The check itself works: the raw config of a keyed type trips it."""
    qtype = question_type(name)
    config = PLANTED[name](SECRET)
    assert leaks(config, qtype.forbidden_student_keys, SECRET if name in TEXT_KEYED else None)


def test_brainstorm_exception() -> None:
    """ADR-071 §1: no key to plant; to_solution is null and the whole config would be caught."""
    qtype = question_type("brainstorm")
    assert qtype.has_key is False
    config = {"prompt": "Un mot pour la respiration ?", "max_ideas": 5}
    assert qtype.to_solution(config) is None
    student = qtype.to_student(config)
    assert student == {"prompt": "Un mot pour la respiration ?", "max_ideas": 5}
    assert leaks(student, qtype.forbidden_student_keys) == []
    # A question is served from its stored form, config beside explanation: serving that whole
    # would be caught by a forbidden key, and whatever a draft carries besides is dropped.
    stored = {"config": config, "explanation": "Pas de bonne réponse."}
    assert leaks(stored, qtype.forbidden_student_keys) == ["explanation"]
    raw = {**config, "reference": SECRET, "explanation": SECRET}
    assert leaks(raw, qtype.forbidden_student_keys, SECRET)
    assert leaks(qtype.to_student(raw), qtype.forbidden_student_keys, SECRET) == []


def test_code_hidden_cases_are_only_counted() -> None:
    student = question_type("code").to_student(_code(SECRET))
    assert [c["name"] for c in student["cases"]] == ["visible"]
    assert student["hidden_cases"] == 1


def test_categorize_cards_are_not_in_column_order() -> None:
    student = question_type("categorize").to_student(_categorize(SECRET))
    assert [c["text"] for c in student["cards"]] == ["Caillou", "Poireau", "Pomme"]
