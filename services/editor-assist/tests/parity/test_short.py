"""short parity: the platform's schema, views and merge, case for case.

Cases derived from heig-quiz `packages/qt-short/src/schema.test.ts` (accepted and rejected
configs, defaults, i18n keys, the empty draft), `server.ts` (toStudent drops the matchers,
toSolution renders them with `describeMatcher` of `packages/domain/src/short.ts`),
`generate.test.ts` (`mergeShort`), and issue 8's list (time, 500 characters, dedupe, the
placeholder kept when nothing is added).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.short import (
    SHORT_CONFIG_VERSION,
    SHORT_MAX_ANSWER_LENGTH,
    empty_short_draft,
)
from quiz_editor_assist.generators.short import merge_short_proposal

SHORT = question_type("short")


def base(**over: Any) -> dict[str, Any]:
    return {
        "configVersion": SHORT_CONFIG_VERSION,
        "prompt": "Give the directive.",
        "matchers": [{"kind": "exact", "value": "#include <stdio.h>"}],
        **over,
    }


def exacts(n: int) -> list[dict[str, Any]]:
    return [{"kind": "exact", "value": f"v{i}"} for i in range(n)]


ACCEPTED = {
    "one exact matcher": base(),
    "a regex matcher with allowed flags": base(
        matchers=[{"kind": "regex", "pattern": "a+", "flags": "im"}]
    ),
    "a number matcher with a relative tolerance": base(
        kind="number",
        matchers=[{"kind": "number", "value": 3.14, "tolerance": 0.01, "toleranceMode": "rel"}],
    ),
    "a date matcher": base(
        kind="date", matchers=[{"kind": "date", "value": "2026-09-20", "toleranceDays": 1}]
    ),
    "a time matcher": base(kind="time", matchers=[{"kind": "time", "value": "14:05"}]),
    "an llm matcher (stored, never published)": base(
        matchers=[{"kind": "llm", "rubric": "Explains."}]
    ),
    "a partial-credit matcher": base(matchers=[{"kind": "exact", "value": "stdio", "points": 0.5}]),
    "a placeholder": base(placeholder="#include …"),
    "twenty matchers": base(matchers=exacts(20)),
    "a unit that is required": base(
        matchers=[{"kind": "number", "value": 4, "unit": "octets", "unitRequired": True}]
    ),
    "explicit prefilters": base(prefilters={"trim": False, "lowercase": False}),
    "a text length window": base(constraints={"minLength": 2, "maxLength": 40}),
    "an unbounded integer window": base(
        kind="number", constraints={"integer": True}, matchers=[{"kind": "number", "value": 4}]
    ),
    "a date window": base(
        kind="date",
        constraints={"from": "2026-01-01", "to": "2026-12-31"},
        matchers=[{"kind": "date", "value": "2026-09-20"}],
    ),
    "a [[…]] reference as a number (ADR-056)": base(
        kind="number", matchers=[{"kind": "number", "value": "[[t]]"}]
    ),
    "a numeric text read as its number": base(
        kind="number", matchers=[{"kind": "number", "value": "4.52"}]
    ),
}
REJECTED = {
    "no matcher at all": base(matchers=[]),
    "twenty-one matchers": base(matchers=exacts(21)),
    "an unknown matcher kind": base(matchers=[{"kind": "fuzzy", "value": "x"}]),
    "a regex that cannot compile (D10)": base(matchers=[{"kind": "regex", "pattern": "a("}]),
    "a regex flag outside imsu": base(matchers=[{"kind": "regex", "pattern": "a", "flags": "g"}]),
    "a pattern longer than 300 characters": base(
        matchers=[{"kind": "regex", "pattern": "a" * 301}]
    ),
    "an empty prompt": base(prompt=""),
    "a date that is not ISO": base(matchers=[{"kind": "date", "value": "20.09.2026"}]),
    "a time that is not hh:mm": base(matchers=[{"kind": "time", "value": "9:05"}]),
    "matcher points above 1": base(matchers=[{"kind": "exact", "value": "x", "points": 2}]),
    "a negative tolerance": base(matchers=[{"kind": "number", "value": 1, "tolerance": -1}]),
    "an unknown answer kind": base(kind="colour"),
    "a future configVersion": base(configVersion=4),
    "a v2 config, which must go through migrate() first": base(configVersion=2),
    "a max length above the hard cap": base(constraints={"maxLength": 501}),
    "a min length above the max length": base(constraints={"minLength": 10, "maxLength": 5}),
    "a min above the max": base(
        kind="number", constraints={"min": 10, "max": 5}, matchers=[{"kind": "number", "value": 7}]
    ),
    "a from after the to": base(
        kind="date",
        constraints={"from": "2026-12-31", "to": "2026-01-01"},
        matchers=[{"kind": "date", "value": "2026-09-20"}],
    ),
    "a non-integer expected value in an integer question": base(
        kind="number", constraints={"integer": True}, matchers=[{"kind": "number", "value": 3.5}]
    ),
    "an exact value over 500 characters": base(matchers=[{"kind": "exact", "value": "x" * 501}]),
}


@pytest.mark.parametrize("config", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_schema_accepts(config: dict[str, Any]) -> None:
    reading = read_draft("short", config)
    assert reading.valid, reading.problems


@pytest.mark.parametrize("config", REJECTED.values(), ids=REJECTED.keys())
def test_schema_rejects(config: dict[str, Any]) -> None:
    assert not read_draft("short", config).valid


def test_i18n_keys_at_their_paths() -> None:
    bad = read_draft(
        "short",
        base(matchers=[{"kind": "exact", "value": "a"}, {"kind": "regex", "pattern": "a("}]),
    )
    assert [(p.path, p.message) for p in bad.problems] == [
        ("matchers.1.pattern", "short.invalid_pattern")
    ]
    integer = read_draft(
        "short",
        base(
            kind="number",
            constraints={"integer": True},
            matchers=[{"kind": "number", "value": 3.5}],
        ),
    )
    assert [(p.path, p.message) for p in integer.problems] == [
        ("matchers.0.value", "short.integer_expected")
    ]
    window = read_draft("short", base(constraints={"minLength": 10, "maxLength": 5}))
    assert [(p.path, p.message) for p in window.problems] == [
        ("constraints.maxLength", "short.length_range")
    ]


def test_defaults_and_the_dropped_v1_options() -> None:
    config = read_draft(
        "short",
        base(matchers=[{"kind": "exact", "value": "const", "caseSensitive": True, "trim": False}]),
    ).config
    assert config is not None
    wire = config.model_dump(by_alias=True, exclude_none=True)
    assert wire["kind"] == "text"
    assert wire["constraints"] == {"minLength": 0, "maxLength": 255, "integer": False}
    assert wire["prefilters"] == {"trim": True, "lowercase": True}
    assert wire["matchers"] == [{"kind": "exact", "value": "const", "points": 1}]


def test_the_empty_draft() -> None:
    draft = empty_short_draft()
    assert draft["prompt"] == "" and draft["matchers"] == [
        {"kind": "exact", "value": "", "points": 1}
    ]
    assert draft["constraints"] == {"minLength": 0, "maxLength": 255, "integer": False}


def test_views() -> None:
    config = base(
        kind="number",
        placeholder="ex. 3,14",
        constraints={"min": 0, "max": 10},
        matchers=[
            {
                "kind": "number",
                "value": 3.14,
                "tolerance": 0.01,
                "toleranceMode": "rel",
                "unit": "m",
            },
            {"kind": "number", "value": 22, "tolerance": 0.5},
            {"kind": "number", "value": "[[t]]"},
            {"kind": "regex", "pattern": "pi"},
            {"kind": "llm", "rubric": "Explains."},
        ],
    )
    assert SHORT.to_student(config) == {
        "prompt": "Give the directive.",
        "kind": "number",
        "constraints": {"minLength": 0, "maxLength": 255, "min": 0, "max": 10, "integer": False},
        "placeholder": "ex. 3,14",
    }
    assert SHORT.to_solution(config) == {
        "expected": ["3.14 ± 1 % m", "22 ± 0.5", "[[t]]", "/pi/i", "Explains."]
    }


# --- the merge (mergeShort) -------------------------------------------------------------------


def draft(**over: Any) -> dict[str, Any]:
    return {**empty_short_draft(), "prompt": "Capital?", **over}


def answers(*values: str | tuple[str, float]) -> dict[str, Any]:
    return {
        "answers": [
            {"value": v} if isinstance(v, str) else {"value": v[0], "tolerance": v[1]}
            for v in values
        ]
    }


NUMBER_314 = {
    "kind": "number",
    "value": 3.14,
    "tolerance": 0.01,
    "toleranceMode": "abs",
    "unitRequired": False,
    "points": 1,
}
MERGES: dict[str, tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]] = {
    "replaces the empty placeholder of a fresh draft with exact matchers": (
        draft(),
        answers("Berne", "Bern", " berne "),
        [
            {"kind": "exact", "value": "Berne", "points": 1},
            {"kind": "exact", "value": "Bern", "points": 1},
        ],
    ),
    "keeps the teacher's matchers and the question's kind": (
        draft(kind="number", matchers=[NUMBER_314]),
        answers("3.14", ("3,1416", 0.001), "pi"),
        [NUMBER_314, {**NUMBER_314, "value": 3.1416, "tolerance": 0.001}],
    ),
    "a date: only YYYY-MM-DD, an impossible day passes": (
        draft(
            kind="date", matchers=[{"kind": "date", "value": "", "toleranceDays": 0, "points": 1}]
        ),
        answers("2026-10-01", "01.10.2026", "2026-02-30"),
        [
            {"kind": "date", "value": "2026-10-01", "toleranceDays": 0, "points": 1},
            {"kind": "date", "value": "2026-02-30", "toleranceDays": 0, "points": 1},
        ],
    ),
    "a time: only HH:MM": (
        draft(kind="time", matchers=[{"kind": "time", "value": "", "points": 1}]),
        answers("14:05", "9:05", "14h05"),
        [{"kind": "time", "value": "14:05", "toleranceMinutes": 0, "points": 1}],
    ),
    "a negative tolerance becomes its absolute value; hex is not a number": (
        draft(kind="number", matchers=[]),
        answers(("12", -0.5), "0x10", "-2,5", "1e3"),
        [
            {**NUMBER_314, "value": 12, "tolerance": 0.5},
            {**NUMBER_314, "value": -2.5, "tolerance": 0},
            {**NUMBER_314, "value": 1000, "tolerance": 0},
        ],
    ),
    "exact dedupe is trimmed lower-case, inner spacing counts": (
        draft(matchers=[{"kind": "exact", "value": "New York", "points": 1}]),
        answers("new york", "NEW  YORK", "  New York  "),
        [
            {"kind": "exact", "value": "New York", "points": 1},
            {"kind": "exact", "value": "NEW  YORK", "points": 1},
        ],
    ),
    "a text over 500 characters is dropped": (
        draft(),
        answers("y" * (SHORT_MAX_ANSWER_LENGTH + 1), "y" * SHORT_MAX_ANSWER_LENGTH),
        [{"kind": "exact", "value": "y" * SHORT_MAX_ANSWER_LENGTH, "points": 1}],
    ),
    "a garbage kind reads as text": (
        draft(kind="colour", matchers=[]),
        answers("bleu"),
        [{"kind": "exact", "value": "bleu", "points": 1}],
    ),
}


@pytest.mark.parametrize(("config", "prop", "matchers"), MERGES.values(), ids=MERGES.keys())
def test_merge(
    config: dict[str, Any], prop: dict[str, Any], matchers: list[dict[str, Any]]
) -> None:
    merged = merge_short_proposal(config, prop)
    assert merged["matchers"] == matchers
    assert {**merged, "matchers": config["matchers"]} == config  # the kind is never touched


def test_nothing_usable_leaves_the_draft_as_it_was_placeholder_included() -> None:
    before = draft(
        kind="date", matchers=[{"kind": "date", "value": "", "toleranceDays": 0, "points": 1}]
    )
    assert merge_short_proposal(before, answers("next Monday")) == before
    assert merge_short_proposal(draft(), {"answers": []}) == draft()


def test_at_most_twenty_matchers() -> None:
    merged = merge_short_proposal(draft(matchers=exacts(18)), answers(*(f"w{i}" for i in range(5))))
    assert len(merged["matchers"]) == 20


@pytest.mark.integration
@pytest.mark.parametrize(
    "case",
    [
        "replaces the empty placeholder of a fresh draft with exact matchers",
        "keeps the teacher's matchers and the question's kind",
        "a time: only HH:MM",
    ],
)
async def test_merge_through_http(wand: Any, case: str) -> None:
    config, prop, matchers = MERGES[case]
    r = await wand.generate("short", config, {"proposal": prop, "explanation": ""})
    assert r.status_code == 200, r.text
    assert r.json()["config"] == {**config, "matchers": matchers}
