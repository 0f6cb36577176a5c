"""`quiz-eval review` in CI: the real gateway process and the scripted stub, the command run as
its own process through the `quiz-eval` dispatcher.

The stub answers every planted flaw with a finding at its path and severity, except the first
labelled question (left unanswered), and answers one clean question with a false finding; so
the figures the command prints are known exactly and prove the harness, not a model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quiz_review.eval.scoring import EvalQuestion, load_questions
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply

from .conftest import Bus, open_bus

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def eval_bus(stub: AnthropicStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bus]:
    """A gateway without a per-person limit for review: one user makes every call."""
    with open_bus(stub, tmp_path_factory.mktemp("eval"), LLM_RATE_LIMITS='{"review": 0}') as b:
        yield b


def question_sent(body: dict[str, Any]) -> dict[str, Any]:
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    document: dict[str, Any] = json.loads(text.split("-----\n", 1)[1].split("\n-----", 1)[0])
    return document


def scripted(questions: list[EvalQuestion]) -> tuple[StubReply, EvalQuestion, EvalQuestion]:
    labelled = [q for q in questions if q.labels]
    clean = [q for q in questions if not q.labels]
    missed, noisy = labelled[0], clean[0]
    by_config = {json.dumps(q.config, sort_keys=True): q for q in questions}

    def answer(body: dict[str, Any]) -> StubReply:
        sent = question_sent(body)
        q = by_config[json.dumps(sent["config"], sort_keys=True)]
        if q is noisy:
            findings = [{"severity": "notice", "path": "explanation", "message": "?", "fix": None}]
        elif q is missed:
            findings = []
        else:
            findings = [
                {
                    "severity": label.severity.value,
                    "path": label.path,
                    "message": label.flaw or "x",
                    "fix": None,
                }
                for label in q.labels
            ]
        return StubReply.tool({"findings": findings})

    return StubReply.callable(answer), missed, noisy


def test_quiz_eval_review_prints_precision_recall_and_false_rate(
    eval_bus: Bus, stub: AnthropicStub
) -> None:
    questions = load_questions()
    assert len(questions) >= 40
    assert len({q.language for q in questions}) >= 3
    reply, missed, noisy = scripted(questions)
    stub.script(*[reply for _ in questions])
    command = shutil.which("quiz-eval", path=str(Path(sys.executable).parent))
    assert command is not None, "the quiz-eval console script is installed"
    out = subprocess.run(
        [command, "review", "--nats-url", eval_bus.url, "--json", "--concurrency", "8"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    labels = sum(len(q.labels) for q in questions)
    clean = [q for q in questions if not q.labels]
    assert figures["questions"] == len(questions) and figures["failed"] == []
    assert figures["overall"]["labels"] == labels
    assert figures["overall"]["matched"] == labels - len(missed.labels)
    assert figures["overall"]["findings"] == labels - len(missed.labels) + 1
    assert figures["clean_questions"] == len(clean)
    assert figures["clean_with_findings"] == 1
    assert figures["false_finding_rate"] == round(1 / len(clean), 4)
    missed_severity = missed.labels[0].severity.value
    assert figures["per_severity"][missed_severity]["recall"] < 1
    assert figures["per_severity"]["notice"]["precision"] < 1  # the false notice
    assert figures["per_severity"]["error" if missed_severity != "error" else "warn"]["recall"] == 1
    assert len(stub.requests) == len(questions)
    # Only the type, config and explanation were sent (ADR-060 §7).
    assert all(
        set(question_sent(r.body)) == {"type", "config", "explanation"} for r in stub.requests
    )
    noisy_result = next(r for r in figures["results"] if r["id"] == noisy.id)
    assert [f["path"] for f in noisy_result["findings"]] == ["explanation"]

    # The plain-text report names the same figures.
    stub.script(*[reply for _ in questions])
    text = subprocess.run(
        [command, "review", "--nats-url", eval_bus.url, "--language", "fr"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert text.returncode == 0, text.stderr
    assert "precision" in text.stdout and "false-finding rate on clean questions" in text.stdout


def test_no_gateway_exits_2() -> None:
    out = subprocess.run(
        [
            shutil.which("quiz-eval", path=str(Path(sys.executable).parent)) or "quiz-eval",
            "review",
            "--nats-url",
            "nats://127.0.0.1:1",
            "--question",
            "mcq-fr-capital-key",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "quiz-eval review" in out.stderr
