"""`quiz-eval review`: precision and recall per severity of the review, and its false-finding rate.

Each question of the labelled set (`questions.json`: planted flaws with their severity and path,
and clean questions, in the platform's config shapes and several languages) is reviewed with the
very call the service makes — `review_request(type, config, explanation)`: the system prompt,
the question as data, purpose `review`, effort low, 4000 tokens out — through the llm-gateway
on NATS (`llm.v1.complete`), so whatever provider and model the gateway is configured with is
the one measured. The reply is read by the service's own rules (`findings_from_reply`), then
scored (`scoring.score`).

    make run                                   # with ANTHROPIC_API_KEY set
    quiz-eval review                           # or: python -m quiz_review.eval.cli
    quiz-eval review --question fr-mcq-wrong-key --json
    quiz-eval review --iwf                     # the item-writing-flaw lint: no model, no bus

The calls are made for `--user` (the gateway's per-person limit of purpose review applies; the
command waits out `rate_limited`). Exit status: 0; 1 under `--min-recall` / `--max-false-rate`;
2 when no model could be called.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import Purpose
from quiz_review.domain.prompt import review_request
from quiz_review.eval import iwf
from quiz_review.eval.scoring import (
    EvalQuestion,
    EvalScore,
    QuestionOutcome,
    findings_from_reply,
    load_questions,
    match_question,
    render,
    score,
)
from quiz_servicekit.eval_dispatch import harness_gateway, harness_parser, run_harness
from quiz_servicekit.llm import LlmClient

RATE_LIMIT_RETRIES = 8


async def review_one(
    llm: LlmClient, question: EvalQuestion, *, user: str, deadline_s: float
) -> QuestionOutcome | str:
    """The question's outcome, or the error code when its call failed."""
    call = review_request(
        question.type, question.config, question.explanation, user=user, deadline_s=deadline_s
    )
    for attempt in range(RATE_LIMIT_RETRIES + 1):
        try:
            reply = await llm.complete(call)
            return match_question(question, findings_from_reply(question, reply.output))
        except ContractError as e:
            if e.code is ErrorCode.rate_limited and attempt < RATE_LIMIT_RETRIES:
                await asyncio.sleep(min(max(e.retry_after_s or 1.0, 0.1), 60.0))
                continue
            if e.code in (ErrorCode.llm_not_configured, ErrorCode.llm_budget_exhausted):
                raise
            return e.code.value
    return ErrorCode.rate_limited.value


async def evaluate(
    questions: Sequence[EvalQuestion],
    nats_url: str,
    *,
    user: str,
    deadline_s: float,
    concurrency: int,
) -> tuple[list[QuestionOutcome], list[str]]:
    """Every question through the gateway at `nats_url`; (outcomes, ids of failed questions)."""
    async with harness_gateway(nats_url, "quiz-eval-review", Purpose.review) as llm:
        slots = asyncio.Semaphore(concurrency)

        async def one(question: EvalQuestion) -> QuestionOutcome | str:
            async with slots:
                return await review_one(llm, question, user=user, deadline_s=deadline_s)

        results = await asyncio.gather(*(one(q) for q in questions))
    outcomes = [r for r in results if isinstance(r, QuestionOutcome)]
    failed = [
        f"{q.id} ({r})" for q, r in zip(questions, results, strict=True) if isinstance(r, str)
    ]
    return outcomes, failed


def as_json(result: EvalScore, outcomes: Sequence[QuestionOutcome]) -> dict[str, Any]:
    def ratio(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "questions": result.questions,
        "per_severity": {
            s.value: {
                "labels": line.labels,
                "findings": line.findings,
                "matched": line.matched,
                "precision": ratio(line.precision),
                "recall": ratio(line.recall),
            }
            for s, line in result.per_severity.items()
        },
        "overall": {
            "labels": result.overall.labels,
            "findings": result.overall.findings,
            "matched": result.overall.matched,
            "precision": ratio(result.overall.precision),
            "recall": ratio(result.overall.recall),
        },
        "located_recall": ratio(result.located_recall),
        "clean_questions": result.clean_questions,
        "clean_with_findings": result.clean_with_findings,
        "findings_on_clean": result.findings_on_clean,
        "false_finding_rate": ratio(result.false_finding_rate),
        "failed": result.failed_questions,
        "results": [
            {
                "id": o.question.id,
                "language": o.question.language,
                "type": o.question.type,
                "labels": len(o.question.labels),
                "findings": [f.model_dump(mode="json") for f in o.findings],
                "matched": len(o.matched),
            }
            for o in outcomes
        ],
    }


def parser() -> argparse.ArgumentParser:
    p = harness_parser(
        "quiz-eval review",
        "Precision and recall per severity of the LLM review over the labelled set, "
        "and its false-finding rate on clean questions, through the llm-gateway.",
        unit="questions reviewed",
        deadline_s=120.0,
    )
    p.add_argument("--question", action="append", help="only this question id (repeatable)")
    p.add_argument("--language", action="append", help="only questions in this language")
    p.add_argument(
        "--min-recall", type=float, default=None, help="exit 1 when overall recall is below"
    )
    p.add_argument(
        "--max-false-rate",
        type=float,
        default=None,
        help="exit 1 when the false-finding rate is above",
    )
    return p


def iwf_main(argv: Sequence[str]) -> int:
    """`quiz-eval review --iwf`: the lint over `iwf.json`, per criterion recall and precision and
    the false-finding rate on clean items. Exit 1 under the issue's targets (recall ≥ 0.85 and
    precision ≥ 0.90 for every criterion, false findings ≤ 5 %) with `--check`."""
    p = argparse.ArgumentParser(
        prog="quiz-eval review --iwf",
        description="The item-writing-flaw lint (issue 30) scored on its labelled set.",
    )
    p.add_argument("--iwf", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="the figures as JSON")
    p.add_argument("--language", action="append", help="only items in this language")
    p.add_argument("--differences", action="store_true", help="list items found otherwise")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    items = iwf.load_items()
    if args.language:
        items = [i for i in items if i.language in args.language]
    outcomes = iwf.lint_items(items)
    result = iwf.score(outcomes)
    if args.json:
        print(json.dumps(iwf.as_json(result, outcomes), ensure_ascii=False, indent=1))
    else:
        print(iwf.render(result))
        if args.differences:
            print("\n".join(iwf.misses(outcomes)))
    if args.check and not iwf.meets_targets(result):
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the evaluation; the dispatcher passes the arguments after `review`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--iwf" in argv:
        return iwf_main(argv)
    args = parser().parse_args(argv)
    Run = tuple[list[QuestionOutcome], list[str]]

    def status(run: Run) -> int:
        outcomes, failed = run
        if not outcomes:
            return 2
        result = score(outcomes, failed)
        recall = result.overall.recall
        if args.min_recall is not None and (recall is None or recall < args.min_recall):
            return 1
        rate = result.false_finding_rate
        if args.max_false_rate is not None and rate is not None and rate > args.max_false_rate:
            return 1
        return 0

    return run_harness(
        "quiz-eval review",
        load_questions(),
        key=lambda q: q.id,
        noun="question",
        only=args.question,
        keep=(lambda q: q.language in args.language) if args.language else None,
        evaluate=lambda questions: evaluate(
            questions,
            args.nats_url,
            user=args.user,
            deadline_s=args.deadline_s,
            concurrency=max(1, args.concurrency),
        ),
        as_json=(lambda run: as_json(score(*run), run[0])) if args.json else None,
        report=lambda run: render(score(*run)),
        status=status,
    )


if __name__ == "__main__":
    sys.exit(main())
