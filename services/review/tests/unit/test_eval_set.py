"""The labelled evaluation set is well formed, in the platform's config shapes, and the scoring
counts what it says (precision and recall per severity, false findings on clean questions)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from quiz_contracts.review import ReviewFinding, Severity
from quiz_review.domain.paths import MISSING, field_value
from quiz_review.domain.states import is_reviewable
from quiz_review.eval.scoring import (
    EvalQuestion,
    Label,
    findings_from_reply,
    load_questions,
    match_question,
    path_covers,
    render,
    score,
)

QUESTIONS = load_questions()

# The camelCase fields every config of the type carries (HQ packages/qt-<type>/src/schema.ts).
REQUIRED_FIELDS: dict[str, tuple[int, set[str]]] = {
    "mcq": (2, {"prompt", "choices", "mode", "policy", "shuffleChoices"}),
    "short": (3, {"prompt", "kind", "constraints", "prefilters", "matchers"}),
    "cloze": (1, {"text", "caseSensitive", "shuffleOptions"}),
    "rich": (1, {"prompt", "rubric", "format"}),
    "categorize": (
        1,
        {"prompt", "columns", "cards", "ordered", "shuffleCards", "shuffleColumns", "policy"},
    ),
    "code": (
        1,
        {"prompt", "language", "runtime", "template", "limits", "referenceSolution", "tests"},
    ),
}


def test_the_set_is_large_multilingual_and_has_clean_questions() -> None:
    assert len(QUESTIONS) >= 40
    languages = Counter(q.language for q in QUESTIONS)
    assert {"fr", "en", "de"} <= set(languages)
    assert min(languages[lang] for lang in ("fr", "en", "de")) >= 10
    assert set(Counter(q.type for q in QUESTIONS)) == set(REQUIRED_FIELDS)
    clean = [q for q in QUESTIONS if q.is_clean]
    assert len(clean) >= 10
    severities = Counter(label.severity for q in QUESTIONS for label in q.labels)
    assert min(severities[s] for s in Severity) >= 5


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_each_question_is_in_its_types_platform_shape(question: EvalQuestion) -> None:
    assert is_reviewable(question.type)
    version, fields = REQUIRED_FIELDS[question.type]
    config = question.config
    assert config["configVersion"] == version
    assert fields <= set(config), fields - set(config)
    assert not any("_" in key for key in _keys(config)), "camelCase keys only"
    if question.type == "mcq":
        right = sum(c["correct"] for c in config["choices"])
        assert 2 <= len(config["choices"]) <= 12
        assert right == 1 if config["mode"] == "single" else right >= 1
    if question.type == "categorize":
        ids = [c["id"] for c in config["cards"]] + [c["id"] for c in config["columns"]]
        assert all(re.fullmatch(r"[a-z0-9]{4,40}", i) for i in ids)
        assert len(set(ids)) == len(ids)
        placed = [card for column in config["columns"] for card in column["cards"]]
        assert set(placed) <= {c["id"] for c in config["cards"]}
    if question.type == "cloze":
        assert "{{" in config["text"]
    if question.type == "code":
        assert config["tests"]["cases"]


@pytest.mark.parametrize("question", [q for q in QUESTIONS if q.labels], ids=lambda q: q.id)
def test_every_label_points_at_a_field_the_question_has(question: EvalQuestion) -> None:
    for label in question.labels:
        for path in label.paths:
            assert field_value(question.config, question.explanation, path) is not MISSING, path
        assert label.flaw


def oracle_reply(question: EvalQuestion) -> dict[str, Any]:
    """What a perfect reviewer would answer: one finding per label, at its first path."""
    return {
        "findings": [
            {
                "severity": label.severity.value,
                "path": label.path,
                "message": label.flaw,
                "fix": None,
            }
            for label in question.labels
        ]
    }


def test_a_perfect_reviewer_scores_one_everywhere() -> None:
    outcomes = [match_question(q, findings_from_reply(q, oracle_reply(q))) for q in QUESTIONS]
    result = score(outcomes)
    for severity in Severity:
        line = result.per_severity[severity]
        assert line.labels > 0
        assert (line.precision, line.recall) == (1.0, 1.0)
    assert result.false_finding_rate == 0.0
    assert result.located_recall == 1.0
    assert "false-finding rate on clean questions: 0.00" in render(result)


def test_a_silent_reviewer_finds_nothing_and_is_never_wrong() -> None:
    result = score(match_question(q, []) for q in QUESTIONS)
    assert result.overall.recall == 0.0
    assert result.overall.precision is None
    assert result.false_finding_rate == 0.0
    assert "n/a" in render(result)


def test_a_noisy_reviewer_pays_on_clean_questions() -> None:
    noise = {
        "findings": [{"severity": "notice", "path": "explanation", "message": "m", "fix": None}]
    }
    result = score(match_question(q, findings_from_reply(q, noise)) for q in QUESTIONS)
    clean = sum(q.is_clean for q in QUESTIONS)
    assert (result.clean_questions, result.clean_with_findings) == (clean, clean)
    assert result.false_finding_rate == 1.0
    assert result.findings_on_clean == clean


def finding(severity: str, path: str) -> ReviewFinding:
    return ReviewFinding(severity=severity, path=path, message="m")


QUESTION = EvalQuestion(
    id="q",
    language="en",
    type="mcq",
    config={},
    explanation="",
    labels=(
        Label(Severity.error, "choices.0.correct", ("choices.1.correct",)),
        Label(Severity.notice, "choices.2"),
    ),
)


def test_paths_match_on_whole_segments_at_or_below_the_label() -> None:
    assert path_covers("choices.2", "choices.2")
    assert path_covers("choices.2", "choices.2.text")
    assert not path_covers("choices.2", "choices.20")
    assert not path_covers("choices.2.text", "choices.2")
    assert not path_covers("choices.2", "choices")


def test_matching_needs_the_severity_and_counts_each_label_once() -> None:
    outcome = match_question(
        QUESTION,
        [
            finding("error", "choices.1.correct"),  # an alternative path
            finding("error", "choices.0.correct"),  # the same flaw again: a false finding
            finding("warn", "choices.2.text"),  # right place, wrong severity
        ],
    )
    assert outcome.matched == ((0, 0),)
    assert outcome.false_findings == (1, 2)
    assert outcome.missed_labels == (1,)
    assert outcome.located_labels == 2
    result = score([outcome])
    assert result.per_severity[Severity.error].precision == 0.5
    assert result.per_severity[Severity.error].recall == 1.0
    assert result.per_severity[Severity.notice].recall == 0.0
    assert result.per_severity[Severity.warn].precision == 0.0
    assert result.overall.precision == pytest.approx(1 / 3)


def test_the_matching_does_not_depend_on_the_order_of_findings() -> None:
    # A wide label first could take the finding only the narrow one can use: a greedy pass
    # would match one label, the maximum matching matches both.
    question = EvalQuestion(
        id="order",
        language="en",
        type="mcq",
        config={},
        explanation="",
        labels=(Label(Severity.warn, "choices"), Label(Severity.warn, "choices.1.text")),
    )
    findings = [finding("warn", "choices.1.text"), finding("warn", "choices.0.text")]
    assert len(match_question(question, findings).matched) == 2
    assert len(match_question(question, findings[::-1]).matched) == 2


def test_a_malformed_set_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "set.json"
    one = {"id": "a", "language": "en", "type": "mcq", "config": {}, "labels": []}
    source.write_text(json.dumps({"questions": [one, one]}))
    with pytest.raises(ValueError, match="twice"):
        load_questions(source)
    bad = one | {"labels": [{"severity": "fatal", "path": "prompt"}]}
    source.write_text(json.dumps({"questions": [bad]}))
    with pytest.raises(ValueError, match="malformed"):
        load_questions(source)


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in (key, *_keys(item))]
    if isinstance(value, list):
        return [k for item in value for k in _keys(item)]
    return []
