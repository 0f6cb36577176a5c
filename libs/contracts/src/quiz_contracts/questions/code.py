"""code: the student completes a program; input/output cases check what it prints.

heig-quiz `packages/qt-code/src/schema.ts` (CODE_CONFIG_VERSION 1) and `server.ts`; the template
and reference rules are in `program.py`. A case compares stdout with `expected` (after the
question's `compare` options) and/or the exit code with `expectedExitCode` (null: any).

Draft:

    {"configVersion": 1, "prompt": "Lisez deux entiers et affichez leur somme.",
     "language": "python", "template": "", "referenceSolution": "",
     "tests": {"mode": "io", "cases": [
       {"name": "", "args": [], "stdin": "", "expected": "", "compareStdout": true,
        "expectedExitCode": 0, "visible": true, "points": 1, "timeMs": null}]}}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.questions.common import (
    DraftBudget,
    Issue,
    Number,
    PlatformModel,
    StudentView,
    Utf16,
    int_in,
    refuse,
)
from quiz_contracts.questions.program import PROGRAM_TEXT_MAX, ProgramConfig, program_student

CODE_CONFIG_VERSION = 1
CODE_MAX_CASES = 30
CASE_NAME_MAX = 60
CASE_STDIN_MAX = 16_000
CASE_EXPECTED_MAX = 16_000
CASE_MAX_ARGS = 32
CASE_ARG_MAX = 200


class NumericCompare(PlatformModel):
    """Compare numbers found in the output within `epsilon` (absolute or relative)."""

    epsilon: Annotated[float, Number(0)]
    mode: Literal["abs", "rel"]


class CodeCompare(PlatformModel):
    """How stdout is compared with `expected`."""

    trim_trailing: bool = True
    ignore_case: bool = False
    numeric: NumericCompare | None = None


class CodeCase(PlatformModel):
    """One test case; `visible` cases are shown to the student, the rest stay opaque."""

    name: Annotated[str, Utf16(1, CASE_NAME_MAX)]
    args: Annotated[
        list[Annotated[str, Utf16(0, CASE_ARG_MAX)]], Field(max_length=CASE_MAX_ARGS)
    ] = []
    stdin: Annotated[str, Utf16(0, CASE_STDIN_MAX)] = ""
    expected: Annotated[str, Utf16(0, CASE_EXPECTED_MAX)]
    compare_stdout: bool = True
    expected_exit_code: Annotated[int, int_in(0, 255)] | None = 0
    visible: bool = False
    points: Annotated[float, Number(0, 100)] = 1
    time_ms: Annotated[int, int_in(100, 20_000)] | None = None

    @model_validator(mode="after")
    def _checks_something(self) -> CodeCase:
        if not self.compare_stdout and self.expected_exit_code is None:
            refuse([Issue(("compareStdout",), "code.case_checks_nothing")])
        return self


class CodeTests(PlatformModel):
    """The cases and how they compare (`tap` mode is the platform's phase 3)."""

    mode: Literal["io"]
    compare: CodeCompare = Field(default_factory=CodeCompare)
    cases: Annotated[list[CodeCase], Field(min_length=1, max_length=CODE_MAX_CASES)]


class CodeConfig(ProgramConfig):
    """A programming question checked by cases."""

    config_version: Literal[1]
    all_or_nothing: bool = False
    tests: CodeTests


def empty_code_case(**overrides: Any) -> dict[str, Any]:
    """`emptyCodeCase()`: a case with every default spelled out (the editor's literal)."""
    case: dict[str, Any] = {
        "name": "",
        "args": [],
        "stdin": "",
        "expected": "",
        "compareStdout": True,
        "expectedExitCode": 0,
        "visible": False,
        "points": 1,
        "timeMs": None,
    }
    case.update(overrides)
    return case


def empty_code_draft() -> dict[str, Any]:
    """`emptyCodeConfig()`: C, trials in the browser, one visible empty case (D16)."""
    return {
        "configVersion": CODE_CONFIG_VERSION,
        "prompt": "",
        "language": "c",
        "runtime": "runno",
        "cooldown": "fixed",
        "template": "",
        "files": [],
        "action": "run",
        "compileArgs": "",
        "limits": {"timeMs": 2000, "memoryMb": 128, "outputKb": 64},
        "runsPerMinute": 10,
        "allOrNothing": False,
        "referenceSolution": "",
        "tests": {
            "mode": "io",
            "compare": {"trimTrailing": True, "ignoreCase": False, "numeric": None},
            "cases": [empty_code_case(visible=True)],
        },
    }


def _compare(config: CodeConfig) -> dict[str, Any]:
    compare = config.tests.compare
    return {
        "trimTrailing": compare.trim_trailing,
        "ignoreCase": compare.ignore_case,
        "numeric": compare.numeric.wire() if compare.numeric is not None else None,
    }


def _case_view(case: CodeCase) -> dict[str, Any]:
    # A case that does not compare stdout has no expected output to show.
    return {
        "name": case.name,
        "args": list(case.args),
        "stdin": case.stdin,
        "expected": case.expected if case.compare_stdout else "",
        "compareStdout": case.compare_stdout,
        "expectedExitCode": case.expected_exit_code,
        "points": case.points,
    }


def code_to_student(config: CodeConfig, view: StudentView) -> dict[str, Any]:
    """The program half, the VISIBLE cases whole, the hidden ones only counted, the compare.

    The compare options say HOW an output is judged, never WHAT it is (audit R-06).
    """
    cases = config.tests.cases
    hidden = [c for c in cases if not c.visible]
    return {
        **program_student(config),
        "visibleCases": [_case_view(c) for c in cases if c.visible],
        "hiddenCount": len(hidden),
        "hiddenPoints": sum(c.points for c in hidden),
        "allOrNothing": config.all_or_nothing,
        "compare": _compare(config),
    }


def code_to_solution(config: CodeConfig) -> dict[str, Any]:
    """`{referenceSolution, cases: [every case with its visibility], compare}`."""
    return {
        "referenceSolution": config.reference_solution,
        "cases": [{**_case_view(c), "visible": c.visible} for c in config.tests.cases],
        "compare": _compare(config),
    }


CODE_BUDGET = DraftBudget(
    text=PROGRAM_TEXT_MAX
    + CODE_MAX_CASES
    * (
        CASE_NAME_MAX
        + CASE_STDIN_MAX
        + CASE_EXPECTED_MAX
        + CASE_MAX_ARGS * (CASE_ARG_MAX + 8)
        + 256
    )
    + 2_048,
    values=128 + CODE_MAX_CASES * (16 + CASE_MAX_ARGS),
)
