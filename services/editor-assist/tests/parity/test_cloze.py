"""cloze parity: the platform's grammar, schema and views; the wand has none (ADR-059 §7).

Cases derived from heig-quiz `packages/qt-cloze/src/schema.test.ts` (accepted and rejected
texts, the parser's i18n key on `text`, the defaults), `server.ts` (toStudent hides every
answer behind an opaque input; toSolution renders `describeBlank`) and the grammar of
`packages/domain/src/cloze.ts`.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import StudentView, question_type, read_draft
from quiz_contracts.questions.cloze import CLOZE_CONFIG_VERSION, empty_cloze_draft, parse_cloze
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed

CLOZE = question_type("cloze")


def base(text: str, **over: Any) -> dict[str, Any]:
    return {"configVersion": CLOZE_CONFIG_VERSION, "text": text, **over}


ACCEPTED = {
    "a plain text blank": base("La loi de {{Newton}}."),
    "alternatives": base("{{Newton|Isaac Newton}}"),
    "a dropdown": base("{{=newton|joule|watt}}"),
    "a number with an absolute tolerance": base("{{#3.14:0.01}}"),
    "a number with a relative tolerance": base("{{#3.14:1%}}"),
    "a regex": base("{{/^[0-9a-f]+$/i}}"),
    "a weight": base("{{2*Newton}}"),
    "a blank inside a fenced code block": base("```c\nint x = {{42}};\n```"),
    "an escaped brace beside a real blank": base("\\{{ is a literal, {{Newton}} is not"),
    "case sensitivity turned on": base("{{Newton}}", caseSensitive=True),
    "shuffling turned off": base("{{=a|b}}", shuffleOptions=False),
}
REJECTED = {
    "a text with no blank at all": base("Just a sentence."),
    "only an escaped brace": base("\\{{ Newton }}"),
    "an empty text": base(""),
    "an unterminated blank": base("La loi de {{Newton"),
    "an empty blank": base("La loi de {{}}."),
    "a blank whose regex cannot compile": base("{{/a(/}}"),
    "a regex flag outside imsu": base("{{/a/g}}"),
    "a malformed number blank": base("{{#3,14:x}}"),
    "fifty-one blanks": base("{{a}}" * 51),
    "a future configVersion": base("{{a}}", configVersion=3),
    "a missing configVersion": {"text": "{{a}}"},
}


@pytest.mark.parametrize("config", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_schema_accepts(config: dict[str, Any]) -> None:
    reading = read_draft("cloze", config)
    assert reading.valid, reading.problems


@pytest.mark.parametrize("config", REJECTED.values(), ids=REJECTED.keys())
def test_schema_rejects(config: dict[str, Any]) -> None:
    assert not read_draft("cloze", config).valid


def test_the_parsers_i18n_key_on_the_text_and_the_defaults() -> None:
    problems = read_draft("cloze", base("La loi de {{Newton")).problems
    assert (problems[0].path, problems[0].message) == ("text", "cloze.unterminated")
    assert [p.message for p in read_draft("cloze", base("x {{}}")).problems] == [
        "cloze.empty_blank",
        "cloze.no_blank",
    ]
    config = read_draft("cloze", base("{{Newton}}")).config
    assert config is not None
    assert config.model_dump(by_alias=True)["caseSensitive"] is False
    assert config.model_dump(by_alias=True)["shuffleOptions"] is True
    assert empty_cloze_draft() == {
        "configVersion": 2,
        "text": "",
        "caseSensitive": False,
        "shuffleOptions": True,
    }


def test_the_grammar() -> None:
    parse = parse_cloze("A {{2*x\\|y|z}} B {{=a|b|=c}} C {{#-1,5:10%}} \\{{D}}")
    assert parse.errors == []
    text, select, number = parse.blanks
    assert (text.kind, text.weight, text.answers) == ("text", 2.0, ["x|y", "z"])
    assert (select.options, select.correct) == (["a", "b", "c"], [0, 2])
    assert (number.value, number.tolerance, number.mode) == (-1.5, 0.1, "rel")
    assert parse.template == "A \u2e220\u2e23 B \u2e221\u2e23 C \u2e222\u2e23 {{D}}"


def test_views() -> None:
    config = base("{{Newton|Isaac}} {{=J|W|N}} {{#3.14:0.01}} {{/ab+/}} {{#2:5%}} {{3*x}}")
    student = CLOZE.to_student(config)
    assert student["blanks"][0] == {"index": 0, "weight": 1, "kind": "input", "numeric": False}
    assert student["blanks"][1]["options"] == [
        {"id": 0, "label": "J"},
        {"id": 1, "label": "W"},
        {"id": 2, "label": "N"},
    ]
    assert student["blanks"][2]["numeric"] is True and student["blanks"][5]["weight"] == 3
    for secret in ("Newton", "Isaac", "3.14", "ab+"):
        assert secret not in str(student)
    view = StudentView(seed=42, item_id="q", shuffle=True)
    shuffled = CLOZE.to_student(config, view)["blanks"][1]["options"]
    assert [o["id"] for o in shuffled] == seeded_shuffle(
        [0, 1, 2], stream_seed(42, "q", "options:1")
    )
    assert CLOZE.to_solution(config) == {
        "blanks": [
            {"index": 0, "expected": "Newton | Isaac"},
            {"index": 1, "expected": "J"},
            {"index": 2, "expected": "3.14 ± 0.01"},
            {"index": 3, "expected": "/ab+/"},
            {"index": 4, "expected": "2 ± 5 %"},
            {"index": 5, "expected": "x"},
        ]
    }


@pytest.mark.integration
async def test_the_wand_is_unsupported_through_http(wand: Any) -> None:
    r = await wand.generate("cloze", base("La loi de {{Newton}}."))
    assert (r.status_code, r.json()["code"]) == (422, "generate_unsupported")
    assert wand.stub.requests == []
