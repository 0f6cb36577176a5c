"""`quiz-eval lesson-fix`: the pass rate of Fix with AI over the seeded-defect lessons.

Each seeded lesson (`quiz_lesson_fix.eval.cases`) is fixed as the service fixes it: one full
check, the planted finding found by key, up to two model tries judged by checkFix. The model is
reached through the llm-gateway on NATS (`llm.v1.complete`, purpose `lesson_fix`): the same call
the service makes, so the score is the service's, on whatever provider the gateway is configured
with (`ANTHROPIC_API_KEY`, and `ANTHROPIC_BASE_URL` for a compatible endpoint), under its model
choice for `lesson_fix`, its daily cap and its ledger.

    make run                                   # with ANTHROPIC_API_KEY set
    quiz-eval lesson-fix                       # or: python -m quiz_lesson_fix.eval.cli
    quiz-eval lesson-fix --case fr_not_a_list --json --fail-under 0.8

Prints one line per lesson and the pass rates after attempt 1 and after attempt 2. Exit status:
0, or 1 under `--fail-under` (rate after attempt 2), or 2 when no model could be called.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import Purpose
from quiz_lesson_fix.domain.fix import Complete, Messages
from quiz_lesson_fix.eval.cases import EvalCase, load_cases
from quiz_lesson_fix.eval.scoring import CaseResult, EvalScore, run_case, score
from quiz_lesson_fix.model_call import gateway_complete
from quiz_servicekit.eval_dispatch import harness_gateway, harness_parser, run_harness

# The gateway limits calls per person and purpose; the evaluation waits its turn this many times.
RATE_LIMIT_RETRIES = 5


def patient(complete: Complete, retries: int = RATE_LIMIT_RETRIES) -> Complete:
    """`complete` that waits out the gateway's `rate_limited` (its retry_after) and asks again."""

    async def call(system: str, messages: Messages, schema: dict[str, Any]) -> Any:
        for _ in range(retries):
            try:
                return await complete(system, messages, schema)
            except ContractError as e:
                if e.code is not ErrorCode.rate_limited:
                    raise
                await asyncio.sleep(min(max(e.retry_after_s or 1.0, 0.1), 60.0))
        return await complete(system, messages, schema)

    return call


async def evaluate(
    cases: Sequence[EvalCase],
    nats_url: str,
    *,
    user: str,
    deadline_s: float,
    max_output_tokens: int,
    concurrency: int,
) -> list[CaseResult]:
    """Every case through the gateway at `nats_url`, `concurrency` at a time, in case order."""
    async with harness_gateway(nats_url, "quiz-eval-lesson-fix", Purpose.lesson_fix) as llm:
        complete = patient(
            gateway_complete(llm, user, deadline_s=deadline_s, max_output_tokens=max_output_tokens)
        )
        slots = asyncio.Semaphore(concurrency)

        async def one(case: EvalCase) -> CaseResult:
            async with slots:
                return await run_case(case, complete)

        return list(await asyncio.gather(*(one(c) for c in cases)))


def _line(result: CaseResult) -> str:
    if result.error is not None:
        outcome = f"error: {result.error}"
    elif result.passed_at is None:
        outcome = "failed: " + "; ".join(result.problems)[:160]
    else:
        outcome = f"passed at try {result.passed_at}"
    return f"{result.name:<26} {result.language:<3} {result.defect:<26} {outcome}"


def report(results: list[CaseResult], total: EvalScore) -> str:
    """The human-readable report: one line per lesson, then the two pass rates."""
    lines = [_line(r) for r in results]
    lines += [
        "",
        f"pass rate after attempt 1: {total.passed_first}/{total.cases} ({total.rate_first:.0%})",
        f"pass rate after attempt 2: {total.passed_second}/{total.cases} ({total.rate_second:.0%})",
    ]
    if total.errors:
        lines.append(f"not measured (model call failed): {', '.join(total.errors)}")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = harness_parser(
        "quiz-eval lesson-fix",
        "Pass rate of Fix with AI over the seeded-defect lessons, after attempt 1 "
        "and after attempt 2, through the llm-gateway.",
        unit="lessons fixed",
        deadline_s=90.0,
    )
    p.add_argument("--case", action="append", help="only this seeded lesson (repeatable)")
    p.add_argument("--max-output-tokens", type=int, default=4000)
    p.add_argument(
        "--fail-under", type=float, default=None, help="exit 1 when the rate after 2 is below"
    )
    return p


def as_json(results: list[CaseResult]) -> dict[str, Any]:
    """`--json`: the score's figures and every lesson's result."""
    total = score(results)
    return {
        "cases": total.cases,
        "passed_first": total.passed_first,
        "passed_second": total.passed_second,
        "rate_first": total.rate_first,
        "rate_second": total.rate_second,
        "failed": total.failed,
        "errors": total.errors,
        "results": [asdict(r) for r in results],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation; the dispatcher passes the arguments after `lesson-fix`."""
    args = parser().parse_args(argv)

    def status(results: list[CaseResult]) -> int:
        total = score(results)
        if total.errors and len(total.errors) == total.cases:
            return 2
        if args.fail_under is not None and total.rate_second < args.fail_under:
            return 1
        return 0

    return run_harness(
        "quiz-eval lesson-fix",
        load_cases(),
        key=lambda c: c.name,
        noun="case",
        only=args.case,
        evaluate=lambda cases: evaluate(
            cases,
            args.nats_url,
            user=args.user,
            deadline_s=args.deadline_s,
            max_output_tokens=args.max_output_tokens,
            concurrency=max(1, args.concurrency),
        ),
        as_json=as_json if args.json else None,
        report=lambda results: report(results, score(results)),
        status=status,
    )


if __name__ == "__main__":
    sys.exit(main())
