"""How a reply's findings are kept, end to end (the model's reply through the real gateway to the
stored review): a table of path and fix cases of our own, after the platform's review tests
(packages/domain/src/review.test.ts, apps/api review tests; FACTS E)."""

from __future__ import annotations

from typing import Any

import pytest

from quiz_testkit.anthropic_stub import AnthropicStub, StubReply

from .conftest import Review, finding

pytestmark = pytest.mark.integration

CONFIG: dict[str, Any] = {
    "configVersion": 2,
    "prompt": "Le resultat de 2 + 2 ?",
    "choices": [
        {"text": "aaa", "correct": False},
        {"text": "4", "correct": True, "feedback": None},
    ],
    "mode": "single",
    "weight": 3,
    # A config field named like the version's explanation: the path `explanation` is never it.
    "explanation": "Car dans la config.",
}
EXPLANATION = "Car 2 + 2 = 4."

# (finding sent by the model, the fix kept or None) — every one of these is KEPT.
KEPT: list[tuple[dict[str, Any], dict[str, str] | None]] = [
    # text: found exactly once, case-sensitive
    (
        finding("prompt", fix={"from": "resultat", "to": "résultat"}),
        {"from": "resultat", "to": "résultat"},
    ),
    (finding("prompt", fix={"from": "Resultat", "to": "Résultat"}), None),
    (finding("prompt", fix={"from": "xyz", "to": "abc"}), None),
    # overlapping occurrences count: "aa" is twice in "aaa"
    (finding("choices.0.text", fix={"from": "aa", "to": "b"}), None),
    (finding("choices.0.text", fix={"from": "", "to": "b"}), None),
    # ticks: from what the value holds, to "true"/"false" only
    (
        finding("choices.0.correct", fix={"from": "false", "to": "true"}),
        {"from": "false", "to": "true"},
    ),
    (finding("choices.1.correct", fix={"from": "false", "to": "true"}), None),
    (finding("choices.0.correct", fix={"from": " false ", "to": "maybe"}), None),
    # numbers, null, lists take no fix, but the finding stays (the path has a value)
    (finding("weight", fix={"from": "3", "to": "4"}), None),
    (finding("choices.1.feedback", fix={"from": "a", "to": "b"}), None),
    (finding("choices", fix={"from": "a", "to": "b"}), None),
    # `explanation` is the version's explanation, never the config's field of that name
    (
        finding("explanation", fix={"from": "Car 2", "to": "Parce que 2"}),
        {"from": "Car 2", "to": "Parce que 2"},
    ),
    (finding("explanation", fix={"from": "dans la config", "to": "x"}), None),
    (finding("choices.1.text", fix={"from": "4", "to": "quatre"}), {"from": "4", "to": "quatre"}),
]

# Every one of these is DROPPED: no path, or a path with no value.
DROPPED: list[dict[str, Any]] = [
    finding("choices.7.text"),
    finding("a..b"),
    finding(".prompt"),
    finding("prompt."),
    finding("__proto__.x"),
    finding("constructor"),
    finding("choices.0.prototype"),
    finding("nope.x"),
    finding("prompt.0"),  # a string has no children
    finding("choices.length"),  # JSON, not JavaScript: a list has no `length`
]
# (Items that are not findings at all — an unknown severity, a missing field — never get past
# the gateway, which validates the reply against REVIEW_OUTPUT_SCHEMA; unit tests cover them.)


async def reviewed(review: Review, stub: AnthropicStub, findings: list[dict[str, Any]]) -> Any:
    v = await review.publish_version(config=CONFIG, explanation=EXPLANATION)
    stub.script(StubReply.tool({"findings": findings}))
    r = await review.call(
        "POST", f"/questions/{v['questionId']}/review", review.contributor(v["questionId"])
    )
    assert r.status_code == 200, r.text
    stored = await review.service.repo.review_of(v["versionId"])
    assert stored is not None and stored.model_dump(mode="json") == r.json()
    return r.json()


async def test_kept_findings_and_their_fixes(review_sqlite: Review, stub: AnthropicStub) -> None:
    body = await reviewed(review_sqlite, stub, [raw for raw, _ in KEPT])
    assert body["state"] == "findings"
    got = [(f["path"], f["fix"]) for f in body["findings"]]
    assert got == [(raw["path"], fix) for raw, fix in KEPT]


async def test_dropped_findings(review_sqlite: Review, stub: AnthropicStub) -> None:
    body = await reviewed(review_sqlite, stub, [*DROPPED, finding("prompt", "warn", "Seul.")])
    assert [(f["path"], f["severity"]) for f in body["findings"]] == [("prompt", "warn")]


async def test_messages_are_trimmed_and_cut(review_sqlite: Review, stub: AnthropicStub) -> None:
    body = await reviewed(
        review_sqlite,
        stub,
        [
            finding("prompt", message="  " + "é" * 1500 + "  "),
            finding("prompt", message="\n ok \t"),
        ],
    )
    assert [f["message"] for f in body["findings"]] == ["é" * 1000, "ok"]


async def test_only_the_first_twenty_are_read_before_dropping(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    """20 findings with no path then 5 good ones: the cut comes first, so nothing is kept."""
    body = await reviewed(review_sqlite, stub, [finding("nope")] * 20 + [finding("prompt")] * 5)
    assert body["state"] == "clean" and body["findings"] == []
    body = await reviewed(
        review_sqlite, stub, [finding("prompt", message=str(i)) for i in range(25)]
    )
    assert [f["message"] for f in body["findings"]] == [str(i) for i in range(20)]
