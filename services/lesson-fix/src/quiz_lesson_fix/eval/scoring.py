"""Running one seeded lesson through the fix, and scoring a run (pure apart from `complete`).

The score is the pass rate after the first try and after the second (FIX_ATTEMPTS): a case
passes when its fix passed checkFix; "after attempt 2" counts the cases passed at either try.
A case whose model call failed (budget, provider) is counted as not passed and reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from quiz_contracts.errors import ContractError
from quiz_lesson_fix.domain.fix import Complete, suggest_fix
from quiz_lesson_fix.eval.cases import EvalCase


@dataclass(frozen=True)
class CaseResult:
    """How one seeded lesson fared: the try that passed (1, 2) or None, and any call error."""

    name: str
    defect: str
    language: str
    passed_at: int | None
    attempts: int
    problems: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class EvalScore:
    """Pass rates over a run."""

    cases: int
    passed_first: int
    passed_second: int
    failed: list[str]
    errors: list[str]

    @property
    def rate_first(self) -> float:
        """Share of cases whose first try passed (0 with no case)."""
        return self.passed_first / self.cases if self.cases else 0.0

    @property
    def rate_second(self) -> float:
        """Share of cases passed by the second try at the latest."""
        return self.passed_second / self.cases if self.cases else 0.0


def score(results: Iterable[CaseResult]) -> EvalScore:
    """Pass rates after attempt 1 and after attempt 2, and which cases failed or errored."""
    results = list(results)
    return EvalScore(
        cases=len(results),
        passed_first=sum(1 for r in results if r.passed_at == 1),
        passed_second=sum(1 for r in results if r.passed_at in (1, 2)),
        failed=[r.name for r in results if r.passed_at is None and r.error is None],
        errors=[r.name for r in results if r.error is not None],
    )


async def run_case(case: EvalCase, complete: Complete) -> CaseResult:
    """Fix one seeded lesson as the service would: one full check, then up to two tries."""
    checked = case.checked()
    finding = case.finding(checked)
    try:
        outcome = await suggest_fix(case.lesson, finding, complete=complete, before=checked)
    except ContractError as exc:
        return CaseResult(case.name, case.defect, case.language, None, 0, error=str(exc))
    last = outcome.attempts[-1] if outcome.attempts else None
    return CaseResult(
        case.name,
        case.defect,
        case.language,
        outcome.passed_at,
        len(outcome.attempts),
        last.problems if last is not None else [],
    )
