"""code: propose the reference and test INPUTS; settle computes the outputs on the runner (§2).

heig-quiz `packages/qt-code/src/generate.ts` (`mergeReference`, `mergeCode`, `settleCode`).

Merge:
- `referenceSolution` is written as proposed (not trimmed), only when the draft's is blank and
  the proposal's is not, and only when it fits the template's editable regions (the @@next cut,
  `quiz_contracts.questions.program`);
- the empty placeholder case (name, stdin and expected blank, no args) goes, only when a case is
  added; a proposed name is trimmed and cut to 60 characters, dropped when blank or when it
  repeats another name compared case-insensitively; stdin is cut to 16,000 characters, args to
  32 of at most 200; `visible` is taken as proposed; the case is `emptyCodeCase` with those
  (expected "", compareStdout true, expectedExitCode 0, points 1); at most 30 cases.

Settle (only a merged draft valid under the schema, as Try runs only a valid one):
- targets are the cases that compare stdout, expect exactly "" and have a non-blank name;
  nothing runs without a runnable reference or without targets;
- a reference that does not compile leaves the draft as it was: `compile_failed`;
- a run that did not time out, run out of memory or get cut writes `expected` = its stdout
  (also when a signal ended it), and a non-null, non-zero exit code overwrites
  `expectedExitCode`; any other run keeps its empty output: `partial`.

Beyond the platform: settle writes into the draft as merged (no default filled in, no unknown
key dropped), and an output that is not UTF-8 text is left empty (`partial`), since `expected`
is a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.errors import ErrorCode
from quiz_contracts.generate import Incomplete
from quiz_contracts.questions.code import (
    CASE_ARG_MAX,
    CASE_MAX_ARGS,
    CASE_NAME_MAX,
    CASE_STDIN_MAX,
    CODE_MAX_CASES,
    CodeConfig,
    empty_code_case,
)
from quiz_contracts.questions.common import js_trim, utf16_cut
from quiz_contracts.questions.program import (
    MAIN_FILE,
    RUNNER_LANGUAGE,
    CodeLimits,
    ProgramConfig,
    reference_regions,
)
from quiz_contracts.runner import (
    RUN_LIMIT_MAXIMA,
    CaseResult,
    RunCase,
    RunFile,
    RunLimits,
    RunReply,
    RunRequest,
    max_output_bytes,
)
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    SettlePlan,
    blank_text,
    copy_draft,
    draft_list,
    proposal_items,
    proposal_string,
    writable,
)


class ProposedCase(BaseModel):
    """A test case without its expected output, which running the reference settles."""

    name: str = Field(description="Short, unique name (at most 60 characters).")
    stdin: str = Field(description="What the program reads on standard input.")
    args: list[str] = Field(description="Command-line arguments, one per entry.")
    visible: bool = Field(description="true: the student can run it; false: hidden.")


class CodeProposal(BaseModel):
    """The reference solution and the test inputs."""

    referenceSolution: str = Field(  # the platform's field name
        description="The solution: the EDITABLE regions of the template, in order."
    )
    cases: list[ProposedCase]


# What every program question shares (code and codeimage): how the reference fits the template.
REFERENCE_RULES = """\
`language` is the program's language and `template` the file the student starts from: the \
lines between `@@lock` and `@@endlock` are fixed, the rest is editable. Write \
`referenceSolution` as the content of the EDITABLE regions only, in order, separated by a line \
`// @@next` (`# @@next` in Python) when there are several; with an empty template or no lock, \
it is the whole program. It must compile and be correct: the platform runs it to compute what \
the question checks. Never rewrite a reference the draft already has (leave it empty then).\
"""

INSTRUCTIONS = f"""\
The question is a programming exercise, graded by running the student's program on test cases. \
{REFERENCE_RULES} Propose `cases`: 4 to 8 test cases in all, each with a short `name` (at most \
60 characters), what the program reads on `stdin`, its command-line `args`, and `visible`: a \
few visible cases the student can run, the rest hidden, covering the edge cases. Do NOT write \
expected outputs: the platform computes them by running the reference. Never repeat a case the \
draft holds.\
"""


def reference_fits(config: Mapping[str, Any], reference: str) -> bool:
    """The reference cuts into the draft template's editable regions."""
    template = config.get("template", "")
    template = "" if template is None else template
    language = config.get("language")
    if not isinstance(template, str):
        return False  # a garbage template: its regions are unknown, so nothing fits
    return (
        reference_regions(template, language if isinstance(language, str) else None, reference)
        is not None
    )


def merge_reference(merged: dict[str, Any], proposal: Mapping[str, Any]) -> None:
    """Write the proposed reference, as proposed, when the draft's is blank and it fits."""
    reference = proposal_string(proposal, "referenceSolution")
    if reference is None or blank_text(reference) or not writable(merged, "referenceSolution"):
        return
    if reference_fits(merged, reference):
        merged["referenceSolution"] = reference


def is_empty_case(case: Any) -> bool:
    """The placeholder case of a fresh draft: name, stdin, expected blank and no args."""
    if not isinstance(case, dict):
        return False
    args = case.get("args")
    no_args = not isinstance(args, list) or not args
    blank = all(
        not isinstance(case.get(k), str) or not js_trim(case[k])
        for k in ("name", "stdin", "expected")
    )
    return blank and no_args


def _name_key(case: Any) -> str | None:
    name = case.get("name") if isinstance(case, dict) else None
    return js_trim(name).lower() if isinstance(name, str) else None


def _proposed_case(raw: Any, names: set[str]) -> dict[str, Any] | None:
    name_text = proposal_string(raw, "name")
    name = utf16_cut(js_trim(name_text), CASE_NAME_MAX) if name_text is not None else ""
    if not name or name.lower() in names:
        return None
    stdin = proposal_string(raw, "stdin") or ""
    args = [utf16_cut(a, CASE_ARG_MAX) for a in proposal_items(raw, "args") if isinstance(a, str)]
    visible = isinstance(raw, Mapping) and raw.get("visible") is True
    return empty_code_case(
        name=name,
        stdin=utf16_cut(stdin, CASE_STDIN_MAX),
        args=args[:CASE_MAX_ARGS],
        visible=visible,
    )


def merge_code_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Reference only when blank and fitting; the placeholder case goes when a case is added."""
    merged = copy_draft(config)
    merge_reference(merged, proposal)
    tests = merged.get("tests")
    if tests is not None and not isinstance(tests, dict):
        return merged  # not an object: the teacher's, kept
    cases = draft_list(tests or {}, "cases")
    if cases is None:
        return merged
    kept = [c for c in cases if not is_empty_case(c)]
    names = {key for key in map(_name_key, kept) if key is not None}
    added: list[dict[str, Any]] = []
    for raw in proposal_items(proposal, "cases"):
        if len(kept) + len(added) >= CODE_MAX_CASES:
            break
        case = _proposed_case(raw, names)
        if case is None:
            continue
        names.add(case["name"].lower())
        added.append(case)
    if added:
        # `mode` is a literal ("io"): a draft without `tests` gets the only value it can hold.
        merged["tests"] = {**(tests or {"mode": "io"}), "cases": [*kept, *added]}
    return merged


def run_limits(limits: CodeLimits, cases: list[Any]) -> RunLimits:
    """The runner's limits for the question's: its wall time (a case's own when longer), output.

    CPU time is the wall time (a program that waits uses none); memory is the runner's own
    default, as its address-space limit is not the platform's `memoryMb`. Output is the
    question's, within what one reply carries for that many cases (`max_output_bytes`: the
    runner refuses more); a longer run is cut and its case left to fill.
    """
    time_ms = max([limits.time_ms, *(c.time_ms for c in cases if c.time_ms is not None)])
    seconds = time_ms / 1000
    return RunLimits(
        cpu_s=min(seconds, RUN_LIMIT_MAXIMA.cpu_s),
        wall_s=min(max(2 * seconds, 5.0), RUN_LIMIT_MAXIMA.wall_s),
        output_bytes=min(limits.output_kb * 1024, max_output_bytes(len(cases))),
    )


def program_files(config: ProgramConfig, regions: list[str]) -> list[RunFile]:
    """The reference assembled into its template as the main file, then the extra files."""
    main = RunFile(path=MAIN_FILE[config.language], content=config.source(regions))
    return [main, *(RunFile(path=f.name, content=f.content) for f in config.files)]


def compile_incomplete(reply: RunReply) -> Incomplete:
    """The reference does not compile: what the compiler said, shortened."""
    output = reply.compile.output.strip()
    detail = f": {output[:500]}" if output else ""
    return Incomplete(
        code=ErrorCode.compile_failed, message=f"The reference does not compile{detail}"
    )


def usable_run(result: CaseResult | None) -> bool:
    """The run printed all it had to say: no timeout, no memory verdict, nothing cut."""
    return result is not None and result.completed


def code_settle_plan(config: CodeConfig) -> SettlePlan | None:
    """Run the reference on every target case; None without a runnable reference or targets."""
    regions = config.regions()
    cases = config.tests.cases
    targets = [
        i
        for i, c in enumerate(cases)
        if c.compare_stdout and c.expected == "" and not blank_text(c.name)
    ]
    if regions is None or not targets:
        return None
    request = RunRequest(
        language=RUNNER_LANGUAGE[config.language],
        files=program_files(config, regions),
        cases=[
            RunCase(name=cases[i].name, stdin=cases[i].stdin, args=list(cases[i].args))
            for i in targets
        ],
        limits=run_limits(config.limits, [cases[i] for i in targets]),
    )
    return SettlePlan(request=request, targets=targets)


def code_settle_apply(
    draft: dict[str, Any], plan: SettlePlan, reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """Write each usable run's stdout (and a non-zero exit code); name the cases left empty."""
    if not reply.compile.ok:
        return draft, [compile_incomplete(reply)]
    settled = copy_draft(draft)
    cases: list[Any] = list(settled["tests"]["cases"])
    left: list[str] = []
    for run_index, case_index in enumerate(plan.targets):
        result = reply.cases[run_index] if run_index < len(reply.cases) else None
        case = dict(cases[case_index])
        if result is None or not usable_run(result) or result.stdout_b64 is not None:
            left.append(str(case.get("name")))
            continue
        case["expected"] = result.stdout
        if result.exit_code is not None and result.exit_code != 0:
            case["expectedExitCode"] = result.exit_code
        cases[case_index] = case
    settled["tests"] = {**settled["tests"], "cases": cases}
    if not left:
        return settled, []
    why = "timed out, ran out of memory, printed too much or printed bytes that are not text"
    return settled, [
        Incomplete(
            code=ErrorCode.partial,
            message=f"Expected output left empty for {', '.join(left)}: the run {why}.",
        )
    ]


class CodeGenerator(BaseGenerator):
    """The programming-question wand; settle computes the expected outputs."""

    type_name = "code"
    instructions = INSTRUCTIONS
    proposal_schema = CodeProposal
    has_settle = True

    merge = staticmethod(merge_code_proposal)

    def settle_plan(self, config: Any) -> SettlePlan | None:
        """See code_settle_plan."""
        return code_settle_plan(config)

    def settle_apply(
        self, draft: dict[str, Any], plan: SettlePlan, reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """See code_settle_apply."""
        return code_settle_apply(draft, plan, reply)

    def settle_notice(self, config: Any) -> str | None:
        """A valid draft without a runnable reference: the outputs were not computed."""
        if isinstance(config, CodeConfig) and config.regions() is None:
            return "No reference solution: the expected outputs were not computed."
        return None
