"""`quiz-eval lesson-fix` in CI: the real gateway process and the stub, run as its own process.

The stub answers each seeded lesson with its reference fix; for every other lesson its first
answer changes nothing, so the run must score exactly half after attempt 1 and all after 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import pytest

from quiz_lesson_fix.eval import cli
from quiz_lesson_fix.eval.cases import EvalCase, load_cases
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.processes import ServiceProcess, llm_gateway_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def eval_gateway(
    nats_url: str, stub: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """The gateway without a per-person limit for lesson_fix: one user makes every call."""
    gateway = llm_gateway_process(
        nats_url,
        stub.base_url,
        tmp_path_factory.mktemp("eval-gateway"),
        LLM_RATE_LIMITS='{"lesson_fix": 0}',
    )
    with gateway as proc:
        yield proc


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def scripted(cases: list[EvalCase]) -> StubReply:
    """Per request: the lesson's reference fix, except a first try that changes nothing for
    every other lesson."""
    by_problem = {
        c.finding().message.replace("<", "‹").replace(">", "›"): (i, c) for i, c in enumerate(cases)
    }

    def answer(body: dict[str, Any]) -> StubReply:
        text = first_text(body)
        i, case = next(v for problem, v in by_problem.items() if problem in text)
        if i % 2 == 1 and len(body["messages"]) == 1:
            return StubReply.tool({"explanation": "Nothing to change.", "edits": []})
        return StubReply.tool(case.reference_reply())

    return StubReply.callable(answer)


def test_the_pass_rates_over_the_seeded_lessons(
    nats_url: str, eval_gateway: ServiceProcess, stub: AnthropicStub
) -> None:
    cases = load_cases()
    stub.default = scripted(cases)
    run = subprocess.run(
        [sys.executable, "-m", "quiz_lesson_fix.eval.cli", "--nats-url", nats_url, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    body = json.loads(run.stdout)
    half = (len(cases) + 1) // 2
    assert (body["cases"], body["passed_first"], body["passed_second"]) == (
        len(cases),
        half,
        len(cases),
    )
    assert body["rate_second"] == 1.0
    assert {r["name"]: r["passed_at"] for r in body["results"]} == {
        c.name: 1 if i % 2 == 0 else 2 for i, c in enumerate(cases)
    }
    assert len(stub.requests) == len(cases) + len(cases) // 2


def test_the_report_and_the_threshold(
    nats_url: str, eval_gateway: ServiceProcess, stub: AnthropicStub, capsys: Any
) -> None:
    # Every first try changes nothing and so does every second: nothing passes.
    stub.default = StubReply.tool({"explanation": "No.", "edits": []})
    status = cli.main(["--nats-url", nats_url, "--case", "en_wyr_shape", "--fail-under", "0.5"])
    out = capsys.readouterr().out
    assert status == 1
    assert "en_wyr_shape" in out and "failed: The edits do not change anything" in out
    assert "pass rate after attempt 1: 0/1 (0%)" in out
    assert "pass rate after attempt 2: 0/1 (0%)" in out


def test_no_bus_or_no_case_is_status_2(capsys: Any) -> None:
    assert cli.main(["--nats-url", "nats://127.0.0.1:1"]) == 2
    assert cli.main(["--case", "no_such_case"]) == 2
    assert "unknown case(s): no_such_case" in capsys.readouterr().err


def test_it_is_registered_for_the_quiz_eval_dispatcher() -> None:
    (entry,) = [e for e in entry_points(group="quiz_eval") if e.name == "lesson-fix"]
    assert entry.load() is cli.main
    helped = subprocess.run(
        [sys.executable, "-m", "quiz_lesson_fix.eval.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0 and "after attempt 2" in helped.stdout
