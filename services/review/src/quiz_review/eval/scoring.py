"""Scoring the review against a labelled set (the harness behind `quiz-eval review`).

A label is a planted flaw: a severity and the path of the field that holds it, with optional
alternative paths where the same flaw can fairly be pointed at elsewhere (the wrong tick or
the tick that is missing). A finding MATCHES a label when:
- its severity is the label's, and
- its path is one of the label's paths or lies below one (prefix rule on whole segments:
  a label at `choices.2` is matched by `choices.2.text` and `choices.2.correct`, never by
  `choices.20`); a finding ABOVE the label (`choices` for `choices.2.text`) does not match.
Each label is matched by at most one finding and each finding matches at most one label
(a maximum matching, so the order of the findings does not change the score). A second
finding on the same flaw is a false finding.

Figures, per severity and overall:
- precision = matched findings / findings reported (None when nothing was reported);
- recall = matched labels / labels (None when there is no label of that severity);
- on clean questions (no label): the false-finding rate = clean questions with at least one
  finding / clean questions, and the number of findings reported on them;
- located recall: labels matched by a finding at the right path whatever its severity.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from quiz_contracts.review import ReviewFinding, Severity
from quiz_review.domain.findings import kept_findings, read_reply

QUESTIONS_FILE = "questions.json"


@dataclass(frozen=True, slots=True)
class Label:
    """A planted flaw: its severity and where it is."""

    severity: Severity
    path: str
    alternatives: tuple[str, ...] = ()
    flaw: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path, *self.alternatives)


@dataclass(frozen=True, slots=True)
class EvalQuestion:
    """A question of the set, in the platform's config shape, with its labels (none: clean)."""

    id: str
    language: str
    type: str
    config: dict[str, Any]
    explanation: str
    labels: tuple[Label, ...]

    @property
    def is_clean(self) -> bool:
        return not self.labels


def load_questions(source: Path | None = None) -> list[EvalQuestion]:
    """The labelled set: the package's `questions.json`, or another file of the same shape.

    Raises ValueError on a malformed file (duplicate id, unknown severity, missing field).
    """
    if source is None:
        text = resources.files(__package__).joinpath(QUESTIONS_FILE).read_text("utf-8")
    else:
        text = source.read_text("utf-8")
    data = json.loads(text)
    questions: list[EvalQuestion] = []
    seen: set[str] = set()
    for raw in data["questions"]:
        try:
            question = EvalQuestion(
                id=str(raw["id"]),
                language=str(raw["language"]),
                type=str(raw["type"]),
                config=dict(raw["config"]),
                explanation=str(raw.get("explanation", "")),
                labels=tuple(
                    Label(
                        severity=Severity(label["severity"]),
                        path=str(label["path"]),
                        alternatives=tuple(str(p) for p in label.get("alternatives", ())),
                        flaw=str(label.get("flaw", "")),
                    )
                    for label in raw.get("labels", ())
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"question {raw.get('id', '?')!r} is malformed: {exc}") from exc
        if question.id in seen:
            raise ValueError(f"question id {question.id!r} appears twice")
        seen.add(question.id)
        questions.append(question)
    return questions


def findings_from_reply(question: EvalQuestion, output: Any) -> list[ReviewFinding]:
    """The findings the service would keep from a model's reply on this question."""
    return kept_findings(question.config, question.explanation, read_reply(output))


def path_covers(label_path: str, finding_path: str) -> bool:
    """The finding's path is the label's, or below it on whole segments."""
    return finding_path == label_path or finding_path.startswith(label_path + ".")


def finding_matches(label: Label, finding: ReviewFinding) -> bool:
    """Same severity, and a path the label covers."""
    return finding.severity == label.severity and located(label, finding)


def located(label: Label, finding: ReviewFinding) -> bool:
    """A path the label covers, whatever the severity."""
    return any(path_covers(p, finding.path) for p in label.paths)


@dataclass(frozen=True, slots=True)
class QuestionOutcome:
    """One question's findings against its labels."""

    question: EvalQuestion
    findings: tuple[ReviewFinding, ...]
    matched: tuple[tuple[int, int], ...]  # (label index, finding index)
    located_labels: int

    @property
    def false_findings(self) -> tuple[int, ...]:
        used = {f for _, f in self.matched}
        return tuple(i for i in range(len(self.findings)) if i not in used)

    @property
    def missed_labels(self) -> tuple[int, ...]:
        used = {label for label, _ in self.matched}
        return tuple(i for i in range(len(self.question.labels)) if i not in used)


def match_question(question: EvalQuestion, findings: Sequence[ReviewFinding]) -> QuestionOutcome:
    """A maximum one-to-one matching of labels to findings (see the module docstring)."""
    matched = _maximum_matching(question.labels, findings, finding_matches)
    located_pairs = _maximum_matching(question.labels, findings, located)
    return QuestionOutcome(
        question=question,
        findings=tuple(findings),
        matched=tuple(sorted(matched)),
        located_labels=len(located_pairs),
    )


@dataclass(frozen=True, slots=True)
class SeverityScore:
    """Counts and ratios of one severity (or of all)."""

    labels: int = 0
    findings: int = 0
    matched: int = 0

    @property
    def precision(self) -> float | None:
        return self.matched / self.findings if self.findings else None

    @property
    def recall(self) -> float | None:
        return self.matched / self.labels if self.labels else None


@dataclass(frozen=True, slots=True)
class EvalScore:
    """The figures `quiz-eval review` prints."""

    questions: int
    per_severity: dict[Severity, SeverityScore]
    overall: SeverityScore
    located_labels: int
    clean_questions: int
    clean_with_findings: int
    findings_on_clean: int
    failed_questions: list[str] = field(default_factory=list)

    @property
    def false_finding_rate(self) -> float | None:
        """Share of clean questions that received at least one finding."""
        return self.clean_with_findings / self.clean_questions if self.clean_questions else None

    @property
    def located_recall(self) -> float | None:
        return self.located_labels / self.overall.labels if self.overall.labels else None


def score(outcomes: Iterable[QuestionOutcome], failed: Sequence[str] = ()) -> EvalScore:
    """Sum the outcomes; `failed` names questions whose review call failed (not scored)."""
    labels = dict.fromkeys(Severity, 0)
    findings = dict.fromkeys(Severity, 0)
    matched = dict.fromkeys(Severity, 0)
    questions = located_labels = clean = clean_with = on_clean = 0
    for outcome in outcomes:
        questions += 1
        located_labels += outcome.located_labels
        for label in outcome.question.labels:
            labels[label.severity] += 1
        for finding in outcome.findings:
            findings[finding.severity] += 1
        for label_index, _ in outcome.matched:
            matched[outcome.question.labels[label_index].severity] += 1
        if outcome.question.is_clean:
            clean += 1
            on_clean += len(outcome.findings)
            clean_with += bool(outcome.findings)
    per_severity = {s: SeverityScore(labels[s], findings[s], matched[s]) for s in Severity}
    overall = SeverityScore(sum(labels.values()), sum(findings.values()), sum(matched.values()))
    return EvalScore(
        questions=questions,
        per_severity=per_severity,
        overall=overall,
        located_labels=located_labels,
        clean_questions=clean,
        clean_with_findings=clean_with,
        findings_on_clean=on_clean,
        failed_questions=list(failed),
    )


def render(result: EvalScore) -> str:
    """The report as plain text, one line per severity."""
    lines = [
        f"questions scored: {result.questions}"
        + (
            f" (failed, not scored: {', '.join(result.failed_questions)})"
            if result.failed_questions
            else ""
        ),
        f"{'severity':<9} {'labels':>6} {'found':>6} {'matched':>7} {'precision':>9} {'recall':>7}",
    ]
    rows = [(s.value, result.per_severity[s]) for s in reversed(Severity)]
    for name, line in [*rows, ("all", result.overall)]:
        lines.append(
            f"{name:<9} {line.labels:>6} {line.findings:>6} {line.matched:>7} "
            f"{_ratio(line.precision):>9} {_ratio(line.recall):>7}"
        )
    lines.append(f"located recall (right path, any severity): {_ratio(result.located_recall)}")
    lines.append(
        f"false-finding rate on clean questions: {_ratio(result.false_finding_rate)} "
        f"({result.clean_with_findings} of {result.clean_questions} clean questions, "
        f"{result.findings_on_clean} findings)"
    )
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _maximum_matching(
    labels: Sequence[Label],
    findings: Sequence[ReviewFinding],
    fits: Callable[[Label, ReviewFinding], bool],
) -> list[tuple[int, int]]:
    """Kuhn's augmenting paths: the most (label, finding) pairs with `fits(label, finding)`."""
    owner: dict[int, int] = {}  # finding index → label index

    def assign(label_index: int, visited: set[int]) -> bool:
        for finding_index, finding in enumerate(findings):
            if finding_index in visited or not fits(labels[label_index], finding):
                continue
            visited.add(finding_index)
            if finding_index not in owner or assign(owner[finding_index], visited):
                owner[finding_index] = label_index
                return True
        return False

    for label_index in range(len(labels)):
        assign(label_index, set())
    return [(label_index, finding_index) for finding_index, label_index in owner.items()]
