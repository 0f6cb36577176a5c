"""code: propose the reference and test cases; settle the outputs on the runner (ADR-059 §2).

The expected outputs are never the model's: `settle_plan` runs the reference on every case whose
expected output is empty and `settle_apply` writes what it printed (and its exit code when not
0). A case that timed out, was cut, ran out of memory or died of a signal keeps its empty output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.errors import ErrorCode
from quiz_contracts.generate import Incomplete
from quiz_contracts.questions.code import (
    CODE_MAX_CASES,
    CODE_SOURCE_MAX,
    CodeConfig,
    CodeProgram,
    reference_regions,
)
from quiz_contracts.runner import CaseResult, RunCase, RunFile, RunReply, RunRequest
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    Proposal,
    copy_draft,
    draft_list,
    is_blank_field,
    is_empty,
    is_placeholder,
    next_id,
    proposal_items,
    proposal_text,
    taken_ids,
)

# The file the runner compiles, by language (java wants the public class's name).
ENTRY_FILES = {
    "python": "main.py",
    "c": "main.c",
    "cpp": "main.cpp",
    "javascript": "main.js",
    "java": "Main.java",
}


class ProposedCase(BaseModel):
    """A test case without its expected output, which running the reference settles."""

    name: str = Field(description="Short, unique name of the case.")
    stdin: str = Field(default="", description="What the program reads on standard input.")
    args: list[str] = Field(default_factory=list, description="Command-line arguments.")
    visible: bool = Field(default=True, description="Shown to the student; false: hidden.")


class CodeProposal(Proposal):
    """The reference program's regions and the test cases."""

    reference: str = Field(
        default="",
        description="The solution: the text of each editable region of the template, in order, "
        "separated by lines '@@next'; the whole program when the template has no '@@edit'.",
    )
    cases: list[ProposedCase] = Field(default_factory=list, max_length=CODE_MAX_CASES)


INSTRUCTIONS = """\
Propose, for this programming question, the reference solution (`reference`) and test cases \
(`cases`: name, stdin, args, visible). The template is the file the student starts from: each \
line '@@edit' is a region the student writes. The reference is the text of each region in \
order, separated by lines '@@next' (no '@@next' when there is one region); with no '@@edit' in \
the template it is the whole program. Do not write expected outputs: they are computed by \
running the reference. In Java the public class is Main. Propose 3 to 6 cases in all, \
counting those written: typical inputs, edge cases, a few hidden (visible: false). Never reuse \
the name of a case already written.\
"""


def reference_fits(config: Mapping[str, Any], reference: str) -> bool:
    """The reference cuts into the template's regions (an absent template is one region)."""
    template = config.get("template")
    if template is None:
        template = ""
    if not isinstance(template, str):
        return False  # a garbage template: its regions are unknown, so nothing fits
    return reference_regions(template, reference) is not None


def merge_reference(merged: dict[str, Any], proposal: dict[str, Any]) -> None:
    """Write the proposed reference only when the draft's is empty and it fits the template."""
    reference = proposal_text(proposal, "reference", CODE_SOURCE_MAX)
    if reference and is_blank_field(merged, "reference") and reference_fits(merged, reference):
        merged["reference"] = reference


def merge_code_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Reference only when empty; drop placeholder cases; append cases with new names."""
    merged = copy_draft(config)
    merge_reference(merged, proposal)
    cases = draft_list(merged, "cases")
    if cases is None:
        return merged
    kept = [c for c in cases if not is_placeholder(c)]
    names = {
        c["name"].strip() for c in kept if isinstance(c, dict) and isinstance(c.get("name"), str)
    }
    taken = taken_ids(cases)
    for raw in proposal_items(proposal, "cases"):
        name = proposal_text(raw, "name", 200)
        if not name or name in names:
            continue
        if len(kept) >= CODE_MAX_CASES:
            break
        args = [a for a in proposal_items(raw, "args") if isinstance(a, str)]
        stdin = raw.get("stdin") if isinstance(raw.get("stdin"), str) else ""
        kept.append(
            {
                "id": next_id("t", taken),
                "name": name,
                "stdin": stdin,
                "args": args,
                "visible": raw.get("visible") is not False,
                "expected_stdout": "",
                "expected_exit_code": 0,
            }
        )
        names.add(name)
    if kept != cases:
        merged["cases"] = kept
    return merged


def program_files(program: CodeProgram) -> list[RunFile]:
    """The reference assembled into its template, as the runner's one source file."""
    return [RunFile(path=ENTRY_FILES[program.language.value], content=program.source())]


def compile_incomplete(reply: RunReply) -> Incomplete:
    """The reference does not compile: what the compiler said, shortened."""
    output = reply.compile.output.strip()
    detail = f": {output[:500]}" if output else ""
    return Incomplete(
        code=ErrorCode.compile_failed, message=f"The reference does not compile{detail}"
    )


def settled_output(result: CaseResult | None) -> tuple[str, int] | None:
    """What a case printed and its exit code, or None when its run is not one to keep."""
    if result is None or not result.completed or result.signal is not None:
        return None
    if result.exit_code is None or result.stdout_b64 is not None:
        return None  # killed, or bytes that are not text: an expected_stdout cannot hold them
    return result.stdout, result.exit_code


def _needs_output(case: Any) -> bool:
    return isinstance(case, dict) and case.get("expected_stdout") in (None, "")


def code_settle_plan(config: Mapping[str, Any]) -> RunRequest | None:
    """Run the reference on every case whose expected output is empty; None when none is."""
    program = CodeConfig.model_validate(dict(config))
    raw_cases = config.get("cases") or []
    cases = [
        RunCase(name=case.name, stdin=case.stdin, args=list(case.args))
        for case, raw in zip(program.cases, raw_cases, strict=False)
        if _needs_output(raw)
    ]
    if not cases:
        return None
    return RunRequest(language=program.language.value, files=program_files(program), cases=cases)


def code_settle_apply(
    config: dict[str, Any], reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """Write each settled output (and a non-zero exit code); name what is left empty."""
    settled = copy_draft(config)
    if not reply.compile.ok:
        return settled, [compile_incomplete(reply)]
    results = {r.name: r for r in reply.cases}
    cases = draft_list(settled, "cases") or []
    left: list[str] = []
    for i, case in enumerate(cases):
        if not _needs_output(case) or not isinstance(case.get("name"), str):
            continue
        output = settled_output(results.get(case["name"]))
        if output is None:
            left.append(case["name"])
            continue
        stdout, exit_code = output
        cases[i] = {**case, "expected_stdout": stdout}
        # A non-zero exit code is written unless the teacher already wrote one.
        if exit_code != 0 and is_empty(case.get("expected_exit_code")):
            cases[i]["expected_exit_code"] = exit_code
    if not left:
        return settled, []
    why = "timed out, was cut or did not finish"
    return settled, [
        Incomplete(
            code=ErrorCode.partial,
            message=f"Expected output left empty for {', '.join(left)}: the reference {why}.",
        )
    ]


class CodeGenerator(BaseGenerator):
    """The programming-question wand; settle computes the expected outputs."""

    type_name = "code"
    instructions = INSTRUCTIONS
    proposal_schema = CodeProposal
    has_settle = True

    merge = staticmethod(merge_code_proposal)

    def settle_plan(self, config: Mapping[str, Any]) -> RunRequest | None:
        """See code_settle_plan."""
        return code_settle_plan(config)

    def settle_apply(
        self, config: dict[str, Any], reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """See code_settle_apply."""
        return code_settle_apply(config, reply)
