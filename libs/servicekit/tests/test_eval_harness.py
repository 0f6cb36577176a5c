"""`run_harness`: the flow every `quiz-eval` harness's `main` shares (choose, evaluate, print,
exit status), run here on plain cases and an `evaluate` written for the test."""

from __future__ import annotations

import json
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.eval_dispatch import run_harness

CASES = [("a", "fr"), ("b", "en"), ("c", "fr")]


def run(capsys: Any, *, only: list[str] | None = None, **kw: Any) -> tuple[int, str, str]:
    seen: list[list[tuple[str, str]]] = []

    async def evaluate(cases: list[tuple[str, str]]) -> list[str]:
        seen.append(cases)
        if kw.pop("fail", False):
            raise ContractError(ErrorCode.llm_not_configured, "no model")
        return [name for name, _ in cases]

    status = run_harness(
        "quiz-eval test",
        CASES,
        key=lambda c: c[0],
        noun="case",
        only=only,
        keep=kw.pop("keep", None),
        evaluate=evaluate,
        as_json=(lambda names: {"names": names}) if kw.pop("json", False) else None,
        report=lambda names: "report: " + ",".join(names),
        status=lambda names: 0 if names else 2,
    )
    out = capsys.readouterr()
    return status, out.out, out.err


def test_every_case_then_the_report_and_the_harness_status(capsys: Any) -> None:
    assert run(capsys) == (0, "report: a,b,c\n", "")


def test_only_and_keep_narrow_the_cases(capsys: Any) -> None:
    status, out, _ = run(capsys, only=["a", "b"], keep=lambda c: c[1] == "fr", json=True)
    assert status == 0 and json.loads(out) == {"names": ["a"]}


def test_an_unknown_case_is_status_2_naming_it(capsys: Any) -> None:
    assert run(capsys, only=["a", "zz"]) == (2, "", "unknown case(s): zz\n")


def test_a_harness_error_is_status_2_with_its_reason(capsys: Any) -> None:
    status, out, err = run(capsys, fail=True)
    assert (status, out) == (2, "") and err.startswith("quiz-eval test: ") and "no model" in err


def test_nothing_measured_is_the_harness_status(capsys: Any) -> None:
    status, out, _ = run(capsys, keep=lambda c: False)
    assert (status, out) == (2, "report: \n")
