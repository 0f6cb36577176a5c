"""`quiz-eval review` against `make run DEMO=1` (issue 34): the demo's canned review of the
planted capital scores right on the project's own labelled set.

The demo answered two findings (the two ticks to swap) for one planted flaw: precision 0.50,
and a first Fix that left the mcq with no right choice. Here the very request the service and
the harness send (`review_request`) goes to the demo's rule, its reply is read and scored by the
harness's own functions.
"""

from __future__ import annotations

from quiz_review.domain.fixes import apply_fix
from quiz_review.domain.prompt import OUTPUT_NAME, REVIEW_OUTPUT_SCHEMA, review_request
from quiz_review.eval.scoring import findings_from_reply, load_questions, match_question, score
from quiz_testkit.anthropic_stub import realistic_instance
from quiz_testkit.demo_replies import demo_output


def test_the_demo_scores_the_planted_capital_at_full_precision_and_recall() -> None:
    (question,) = [q for q in load_questions() if q.id == "mcq-fr-capital-key"]
    call = review_request(
        question.type, question.config, question.explanation, user="teacher-1", deadline_s=60
    )
    body = {"messages": [m.model_dump(mode="json") for m in call.messages]}
    output, _ = demo_output(OUTPUT_NAME, body, realistic_instance(REVIEW_OUTPUT_SCHEMA))
    findings = findings_from_reply(question, output)
    result = score([match_question(question, findings)])
    assert result.overall.precision == 1.0 and result.overall.recall == 1.0, findings
    (finding,) = findings
    assert finding.message.count("Sydney") and "Canberra" in finding.message
    # No Fix that would leave an mcq without a right choice: a single-mode key moves in two
    # ticks, which the message names; every Fix the demo does offer keeps one right choice.
    if finding.fix is not None:
        index = int(finding.path.split(".")[1])
        choices = [dict(c) for c in question.config["choices"]]
        choices[index]["correct"] = apply_fix(
            choices[index]["correct"], finding.fix.from_, finding.fix.to
        )
        assert sum(c["correct"] for c in choices) == 1
