"""The registry-wide leak test: no key reaches a student view (invariant 4, ADR-071 §1).

Two independent checks on every student view, as heig-quiz's own `toStudent.test.ts` of each
type does: no forbidden key anywhere, and no planted secret VALUE (which catches a leak that
renamed a field). A third: two configs that differ only in their key give the same view.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from quiz_contracts.questions import (
    QUESTION_TYPES,
    STAFF_ONLY_KEYS,
    StudentView,
    question_type,
)
from quiz_contracts.questions.common import keys_in

SECRET = "S3CRET-7f1c"
VIEWS = [StudentView(), StudentView(seed=7, item_id="i", shuffle=True)]


def leaks(view: Any, forbidden: frozenset[str], secret: str | None = None) -> list[str]:
    """What in a student view betrays the key: a forbidden key, or the planted secret."""
    found = sorted(keys_in(view) & forbidden)
    if secret is not None and secret in json.dumps(view, ensure_ascii=False):
        found.append(f"secret {secret!r}")
    return found


# One config per keyed type, in the platform's shape, SECRET planted in every key field of text.
def _mcq(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 2,
        "prompt": "Capitale de la France ?",
        "mode": "single",
        "policy": "symmetric",
        "choices": [{"text": "Paris", "correct": True}, {"text": "Lyon", "correct": False}],
    }


def _short(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 3,
        "prompt": "Mot de passe ?",
        "matchers": [
            {"kind": "exact", "value": secret},
            {"kind": "regex", "pattern": f"{secret}-[0-9]+"},
            {"kind": "llm", "rubric": secret},
        ],
    }


def _rich(secret: str) -> dict[str, Any]:
    return {"configVersion": 1, "prompt": "Discutez.", "reference": secret, "rubric": f"- {secret}"}


def _categorize(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Triez.",
        "policy": "all_or_nothing",
        "columns": [
            {"id": "fru1aaaa", "label": "Fruits", "cards": ["pom1aaaa"]},
            {"id": "leg1aaaa", "label": "Légumes", "cards": ["poi1aaaa"]},
        ],
        "cards": [
            {"id": "pom1aaaa", "text": "Pomme"},
            {"id": "poi1aaaa", "text": "Poireau"},
            {"id": "cai1aaaa", "text": "Caillou"},
        ],
    }


def _code(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Affichez le mot.",
        "language": "python",
        "template": "def main():\n# @@lock\n    pass\n# @@endlock\nmain()\n",
        "referenceSolution": f"print({secret!r})\n# @@next\nprint(1)",
        "compileArgs": f"-D{secret}",
        "files": [{"name": "data.txt", "content": secret}],
        "tests": {
            "mode": "io",
            "cases": [
                {"name": "visible", "stdin": "1", "expected": "ok\n", "visible": True},
                {
                    "name": f"hidden-{secret}",
                    "stdin": secret,
                    "args": [secret],
                    "expected": secret,
                    "expectedExitCode": 3,
                },
            ],
        },
    }


def _codeimage(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Dessinez un carré.",
        "language": "python",
        "referenceSolution": f"# {secret}\nprint('1 1 1 1 0 1 1 1 1')",
        "compileArgs": secret,
        "image": {"width": 3, "height": 3, "palette": "bw"},
        "target": {"width": 3, "height": 3, "palette": "bw", "pixels": "111101111"},
    }


def _cloze(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 2,
        "text": f"La capitale est {{{{{secret}|{secret}-alt}}}}. "
        f"Et {{{{/{secret}/}}}} {{{{#42:1}}}}.",
    }


def _circuit(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Construisez un diviseur.",
        "grading": {"mode": "simulation", "tolerance": 0.05, "rubric": secret},
        "stimuli": [
            {"name": "shown", "source": {"kind": "dc", "volts": 5}, "load": {"kind": "open"}},
            {
                "name": secret,
                "source": {"kind": "dc", "volts": 1},
                "load": {"kind": "open"},
                "visible": False,
            },
        ],
        "reference": {
            "components": [{"id": "c1", "kind": "R", "x": 100, "y": 100, "name": "Rsecret"}],
            "wires": [],
        },
    }


def _diagram(secret: str) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Dessinez les classes.",
        "kind": "class",
        "reference": {
            "nodes": [{"id": "abcd0001", "t": "class", "x": 0, "y": 0, "name": secret}],
            "links": [],
        },
        "rubric": secret,
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
TEXT_KEYED = {"short", "rich", "code", "codeimage", "cloze", "diagram"}


def _key_variants(name: str) -> list[dict[str, Any]]:
    """Configs of a type that differ ONLY in their key: a student view must not tell them apart."""
    base = PLANTED[name](SECRET)
    other = copy.deepcopy(base)
    if name == "mcq":
        other["choices"][0]["correct"], other["choices"][1]["correct"] = False, True
    elif name == "short":
        other["matchers"] = [{"kind": "exact", "value": "autre"}]
    elif name == "rich":
        other["reference"], other["rubric"] = "x", ""
    elif name == "categorize":
        other["columns"][0]["cards"], other["columns"][1]["cards"] = ["cai1aaaa"], ["pom1aaaa"]
    elif name == "code":
        other["referenceSolution"] = "print(0)\n# @@next\nprint(2)"
        other["tests"]["cases"][1].update(stdin="z", args=[], expected="", expectedExitCode=0)
    elif name == "codeimage":
        other["referenceSolution"] = "print(1)"
    elif name == "cloze":
        other["text"] = "La capitale est {{Paris}}. Et {{/x+/}} {{#7:0}}."
    elif name == "circuit":
        other["reference"] = None
        other["grading"] = {"mode": "manual", "tolerance": 0.5, "rubric": ""}
    elif name == "diagram":
        other["reference"] = {"nodes": [], "links": []}
        other["rubric"] = ""
    return [base, other]


def test_every_type_has_a_leak_fixture() -> None:
    assert set(PLANTED) | {"brainstorm"} == set(QUESTION_TYPES)
    assert {n for n, t in QUESTION_TYPES.items() if not t.has_key} == {"brainstorm"}


def test_only_mcq_short_and_cloze_take_variables() -> None:
    takes = {n for n, t in QUESTION_TYPES.items() if t.takes_variables}
    assert takes == {"mcq", "short", "cloze"}  # ADR-056


@pytest.mark.parametrize("view", VIEWS, ids=["preview", "shuffled"])
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_to_student_never_holds_the_key(name: str, view: StudentView) -> None:
    qtype = question_type(name)
    config = PLANTED[name](SECRET)
    student = qtype.to_student(config, view)
    assert leaks(student, qtype.forbidden_student_keys, SECRET) == []
    assert qtype.forbidden_student_keys >= STAFF_ONLY_KEYS - {"expected"}
    solution = qtype.to_solution(config)
    assert solution is not None
    if name in TEXT_KEYED:
        # The secret was planted in a key field: the solution carries it, the student view not.
        assert SECRET in json.dumps(solution, ensure_ascii=False)


@pytest.mark.parametrize("view", VIEWS, ids=["preview", "shuffled"])
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_student_view_is_the_same_whatever_the_key(name: str, view: StudentView) -> None:
    qtype = question_type(name)
    variants = _key_variants(name)
    views = [qtype.to_student(v, view) for v in variants]
    solutions = [qtype.to_solution(v) for v in variants]
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
    config = {"configVersion": 1, "prompt": "Un mot pour la respiration ?", "maxIdeas": 5}
    assert qtype.to_solution(config) is None
    student = qtype.to_student(config)
    assert student == {"prompt": "Un mot pour la respiration ?", "maxIdeas": 5}
    assert leaks(student, qtype.forbidden_student_keys) == []
    stored = {"config": config, "explanation": "Pas de bonne réponse."}
    assert leaks(stored, qtype.forbidden_student_keys) == ["explanation"]
    raw = {**config, "reference": SECRET, "explanation": SECRET}
    assert leaks(raw, qtype.forbidden_student_keys, SECRET)
    assert leaks(qtype.to_student(raw), qtype.forbidden_student_keys, SECRET) == []


def test_code_hidden_cases_are_only_counted() -> None:
    student = question_type("code").to_student(_code(SECRET))
    assert [c["name"] for c in student["visibleCases"]] == ["visible"]
    assert (student["hiddenCount"], student["hiddenPoints"]) == (1, 1)
