"""The demo mode's rules (quiz_testkit.demo_replies): each reply read off its request, labelled."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from quiz_testkit.demo_replies import (
    DEMO_LABEL,
    arithmetic_value,
    demo_output,
    grounded_answer,
    ideas_alike,
    picture_program,
)


def _body(user: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": user}]}]}


def test_arithmetic_is_read_from_the_statement() -> None:
    assert arithmetic_value("2 + 2 ?") == 4
    assert arithmetic_value("Combien font 6 × 7 ?") == 42
    assert arithmetic_value("(1 + 2) * 3 - 4 = ?") == 5
    assert arithmetic_value("How many legs has a spider?") is None
    assert arithmetic_value("Version 2 of the API") is None
    assert arithmetic_value("Solve 2x + 3 = 7.") is None
    assert arithmetic_value("3 x 5 = ?") == 15


def test_the_picture_program_draws_the_statement_at_the_draft_size() -> None:
    program = picture_program("Draw a white square with a black centre.", 4, 3, "bw")
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert out.split("\n")[:3] == ["1 1 1 1", "1 0 0 1", "1 1 1 1"]
    # The colours in the order the statement names them, in the palette's own values.
    red = picture_program("A blue frame around a red inside.", 3, 3, "color16")
    assert "OUTER, INNER = 1, 4" in red


def test_the_grounded_answer_is_the_passage_word_after_the_question_words() -> None:
    assert grounded_answer("What do bees make?", "Bees make wax.") == "wax"
    assert grounded_answer("Que mangent les chats ?", "Les chats mangent des souris.") == "des"
    assert grounded_answer("Who?", "Nothing in common here") is None


def test_a_lesson_fix_names_the_request_s_own_block() -> None:
    section = {
        "blocks": [
            {"id": "tx9", "type": "text", "text": "Bees make wax.", "editable": True},
            {
                "id": "qq7",
                "type": "question",
                "questionType": "single",
                "prompt": "What do bees make?",
                "answer": "honey",
                "editable": True,
            },
        ]
    }
    user = f'<section>\n{json.dumps(section)}\n</section>\n\n<problem code="E_GROUNDING_SINGLE">'
    output, _ = demo_output("lesson_fix", _body(user), {"explanation": "", "edits": []})
    (edit,) = output["edits"]
    assert (edit["blockId"], edit["answer"], edit["text"]) == ("qq7", "wax", "")
    assert output["explanation"].startswith(DEMO_LABEL)
    # A problem no rule knows: a no-op on a real block, never an invented id.
    other = user.replace("E_GROUNDING_SINGLE", "W_SOMETHING")
    output, rule = demo_output("lesson_fix", _body(other), {"explanation": "", "edits": []})
    assert [e["blockId"] for e in output["edits"]] == ["tx9"] and "no rule" in rule


def test_the_poll_batch_hides_corrects_and_attaches_by_id() -> None:
    user = "\n\n".join(
        [
            'Question (data): "Qu\'est-ce qui caractérise le vivant ?"',
            'Ideas on the wall (data): [{"id": "e1", "text": "Respirer"}]',
            "NEW ideas to judge (data): "
            + json.dumps(
                [
                    {"id": "n1", "text": "la respiraton"},
                    {"id": "n2", "text": "Paul est un idiot"},
                    {"id": "n3", "text": "respirer"},
                    {"id": "n4", "text": "[student] grandit"},
                    {"id": "n5", "text": "annuler la mort"},
                ]
            ),
        ]
    )
    output, _ = demo_output("judge_ideas", _body(user), {"ideas": []})
    verdicts = {v["id"]: v for v in output["ideas"]}
    # The noun with a typo and the verb on the wall say the same: one bubble (issue 34).
    assert verdicts["n1"] == {
        "id": "n1",
        "offensive": False,
        "correction": "la respiration",
        "sameAs": "e1",
    }
    assert verdicts["n2"]["offensive"] and verdicts["n4"]["offensive"]
    assert verdicts["n2"]["sameAs"] is None and verdicts["n4"]["sameAs"] is None
    assert verdicts["n3"]["sameAs"] == "e1"
    assert not verdicts["n5"]["offensive"]  # an insult is a whole word, not a part of one
    assert verdicts["n5"]["sameAs"] is None


def test_the_poll_batch_groups_the_documented_variants_and_corrects_only_typos() -> None:
    """Issue 34 item 2: phones typed these; the wall showed "La respiration" and
    "Respiration", "Les cellules" and "Cellule" apart, and "→ Capitalised" on every row."""
    typed = [
        "se reproduire",
        "la respiraton",
        "Respiration",
        "respirer",
        "les cellules",
        "cellule",
        "Paul est un idiot",
        "reproduction",
        "grandir",
    ]
    ideas = [{"id": f"n{i}", "text": t} for i, t in enumerate(typed, 1)]
    user = "\n\n".join(
        [
            'Question (data): "Qu\'est-ce qui caractérise le vivant ?"',
            "Ideas on the wall (data): []",
            f"NEW ideas to judge (data): {json.dumps(ideas)}",
        ]
    )
    output, rule = demo_output("judge_ideas", _body(user), {"ideas": []})
    verdicts = {v["id"]: v for v in output["ideas"]}
    same = {k: v["sameAs"] for k, v in verdicts.items()}
    assert same == {
        "n1": None,
        "n2": None,
        "n3": "n2",  # Respiration → la respiraton
        "n4": "n2",  # respirer: the verb of the noun
        "n5": None,
        "n6": "n5",  # cellule → les cellules
        "n7": None,  # hidden, attached to nothing
        "n8": "n1",  # reproduction → se reproduire
        "n9": None,
    }
    assert verdicts["n7"]["offensive"]
    # Only the typo is corrected; every other idea comes back as typed (no arrow on the board).
    changed = {
        k: v["correction"] for k, v in verdicts.items() if v["correction"] != typed[int(k[1:]) - 1]
    }
    assert changed == {"n2": "la respiration"}
    assert "1 corrected" in rule and "4 grouped" in rule


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Les cellules", "la cellule"),
        ("celulle", "cellule"),
        ("Breathing", "to breathe"),
        ("se nourrir", "la nourriture"),
        ("L'évolution", "evolution"),
        ("the cells", "Cell"),
    ],
)
def test_spelling_variants_and_near_synonyms_are_alike(a: str, b: str) -> None:
    assert ideas_alike(a, b) and ideas_alike(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("respirer", "se reproduire"),
        ("mouvement", "mourir"),
        ("la mort", "annuler la mort"),
        ("vie", "vue"),
        ("eau", "air"),
        ("grandir", "croissance"),  # a synonym no rule knows: a model's work
    ],
)
def test_different_ideas_stay_apart(a: str, b: str) -> None:
    assert not ideas_alike(a, b)


def test_review_swaps_the_ticks_of_a_wrong_capital_and_nothing_else() -> None:
    def review(config: dict[str, Any]) -> Any:
        document = json.dumps({"type": "mcq", "config": config, "explanation": ""})
        user = f"----- BEGIN QUESTION ab12 -----\n{document}\n----- END QUESTION ab12 -----\n"
        return demo_output("report_findings", _body(user), {"findings": ["realistic"]})[0]

    wrong = {
        "prompt": "What is the capital of Australia?",
        "choices": [{"text": "Sydney", "correct": True}, {"text": "Canberra", "correct": False}],
    }
    # One flaw, one finding naming both ticks; no Fix: in single mode one tick alone left an
    # mcq with no right choice (issue 34).
    (finding,) = review(wrong)["findings"]
    assert (finding["path"], finding["fix"]) == ("choices.0.correct", None)
    assert "untick « Sydney » and tick « Canberra »" in finding["message"]
    right = {**wrong, "choices": [{"text": "Canberra", "correct": True}]}
    assert review(right) == {"findings": []}
    # Where one replacement does leave a consistent mcq, the finding has its Fix.
    missing = {
        "prompt": "What is the capital of Australia?",
        "mode": "multiple",
        "choices": [{"text": "Sydney", "correct": False}, {"text": "Canberra", "correct": False}],
    }
    (finding,) = review(missing)["findings"]
    assert finding["path"] == "choices.1.correct"
    assert finding["fix"] == {"from": "false", "to": "true"}
    extra = {
        **missing,
        "choices": [{"text": "Sydney", "correct": True}, {"text": "Canberra", "correct": True}],
    }
    (finding,) = review(extra)["findings"]
    assert finding["path"] == "choices.0.correct"
    assert finding["fix"] == {"from": "true", "to": "false"}


def test_a_tool_no_rule_knows_gets_the_fallback() -> None:
    fallback = {"anything": [1, 2, 3]}
    assert demo_output("some_tool", _body("hi"), fallback) == (fallback, "some_tool: realistic")
    # The wand on a statement no rule reads: realistic, still labelled.
    draft = json.dumps({"type": "mcq", "config": {"prompt": "Pick a colour."}, "explanation": ""})
    output, _ = demo_output(
        "propose_mcq",
        _body(f"<draft>\n{draft}\n</draft>"),
        {"proposal": {"choices": []}, "explanation": "x"},
    )
    assert output == {"proposal": {"choices": []}, "explanation": f"{DEMO_LABEL} x"}
