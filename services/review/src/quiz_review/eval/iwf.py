"""`quiz-eval review --iwf`: the item-writing-flaw lint (issue 30) scored on its labelled set.

`iwf.json` holds mcq written for this project in the platform's config shape (`configVersion`
2), in French, English, German and Italian, on school subjects; each carries `flaws`, the
criteria of the rubric a reader finds in it by the definitions of docs/review.md ("Item-writing
flaws"), and clean items (`flaws: []`) many of which are near misses (`note`).

Scoring is per item and criterion: the lint found the criterion on the item (any finding of its
code) or not. Per criterion: recall = found ∩ labelled / labelled, precision = found ∩
labelled / found. On clean items: the false-finding rate is the share with at least one finding.
No model, no bus: the lint is the service's own pure function (`lint_question`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from quiz_contracts.review import LINT_CRITERIA
from quiz_review.domain.iwf.lint import CRITERIA, lint_question

CODE_OF = {c.number: c.code for c in CRITERIA}


@dataclass(frozen=True)
class IwfItem:
    """One labelled mcq."""

    id: str
    language: str
    subject: str
    flaws: frozenset[int]
    config: dict[str, Any]
    note: str = ""


@dataclass(frozen=True)
class IwfOutcome:
    item: IwfItem
    found: frozenset[int]


@dataclass(frozen=True)
class CriterionScore:
    criterion: int
    labelled: int
    found: int
    hits: int

    @property
    def recall(self) -> float | None:
        return self.hits / self.labelled if self.labelled else None

    @property
    def precision(self) -> float | None:
        return self.hits / self.found if self.found else None


@dataclass(frozen=True)
class IwfScore:
    criteria: tuple[CriterionScore, ...]
    clean: int
    clean_flagged: int
    items: int

    @property
    def false_finding_rate(self) -> float | None:
        return self.clean_flagged / self.clean if self.clean else None


def load_items(text: str | None = None) -> list[IwfItem]:
    """The labelled set (`iwf.json` beside this module, or the JSON text given)."""
    if text is None:
        text = resources.files(__package__).joinpath("iwf.json").read_text("utf-8")
    return [
        IwfItem(
            id=raw["id"],
            language=raw["language"],
            subject=raw.get("subject", ""),
            flaws=frozenset(raw["flaws"]),
            config=raw["config"],
            note=raw.get("note", ""),
        )
        for raw in json.loads(text)
    ]


def lint_items(items: Sequence[IwfItem]) -> list[IwfOutcome]:
    """Each item through the service's lint: the criteria it found."""
    return [
        IwfOutcome(
            item,
            frozenset(
                f.criterion for f in lint_question("mcq", item.language, item.config).findings
            ),
        )
        for item in items
    ]


def score(outcomes: Sequence[IwfOutcome]) -> IwfScore:
    per = []
    for number in LINT_CRITERIA:
        labelled = sum(1 for o in outcomes if number in o.item.flaws)
        found = sum(1 for o in outcomes if number in o.found)
        hits = sum(1 for o in outcomes if number in o.item.flaws and number in o.found)
        per.append(CriterionScore(number, labelled, found, hits))
    clean = [o for o in outcomes if not o.item.flaws]
    return IwfScore(
        criteria=tuple(per),
        clean=len(clean),
        clean_flagged=sum(1 for o in clean if o.found),
        items=len(outcomes),
    )


# Issue 30's targets, for every criterion and on clean items.
MIN_RECALL = 0.85
MIN_PRECISION = 0.90
MAX_FALSE_RATE = 0.05


def meets_targets(result: IwfScore) -> bool:
    """Every criterion at recall ≥ 0.85 and precision ≥ 0.90, false findings ≤ 5 %."""
    for c in result.criteria:
        if c.recall is None or c.recall < MIN_RECALL:
            return False
        if c.precision is None or c.precision < MIN_PRECISION:
            return False
    rate = result.false_finding_rate
    return rate is not None and rate <= MAX_FALSE_RATE


def _ratio(value: float | None) -> str:
    return "   -" if value is None else f"{value:.2f}"


def render(result: IwfScore) -> str:
    """The table: per criterion labelled, found, recall, precision; then clean items."""
    lines = [
        f"item-writing-flaw lint: {result.items} mcq",
        f"{'criterion':<32} {'labelled':>8} {'found':>6} {'recall':>7} {'precision':>9}",
    ]
    for c in result.criteria:
        name = f"{c.criterion:>2} {CODE_OF[c.criterion]}"
        lines.append(
            f"{name:<32} {c.labelled:>8} {c.found:>6} {_ratio(c.recall):>7} "
            f"{_ratio(c.precision):>9}"
        )
    rate = result.false_finding_rate
    lines.append(
        f"clean items: {result.clean}, with a finding: {result.clean_flagged} "
        f"(false-finding rate {_ratio(rate)})"
    )
    return "\n".join(lines)


def misses(outcomes: Sequence[IwfOutcome]) -> list[str]:
    """One line per item whose findings differ from its labels (what to look at)."""
    out = []
    for o in outcomes:
        if o.found != o.item.flaws:
            missed = sorted(o.item.flaws - o.found)
            extra = sorted(o.found - o.item.flaws)
            out.append(f"{o.item.id}: missed {missed} extra {extra}")
    return out


def as_json(result: IwfScore, outcomes: Sequence[IwfOutcome]) -> dict[str, Any]:
    return {
        "items": result.items,
        "criteria": [
            {
                "criterion": c.criterion,
                "code": CODE_OF[c.criterion],
                "labelled": c.labelled,
                "found": c.found,
                "recall": c.recall,
                "precision": c.precision,
            }
            for c in result.criteria
        ],
        "clean": result.clean,
        "cleanWithFinding": result.clean_flagged,
        "falseFindingRate": result.false_finding_rate,
        "differences": misses(outcomes),
    }
