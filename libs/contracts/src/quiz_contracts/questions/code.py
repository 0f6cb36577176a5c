"""code: the student completes a program; hidden and visible cases check what it prints.

Template format. `template` is the file the student starts from. A line whose only content is
`@@edit` (leading spaces allowed) is an editable region: the student's text replaces that line,
indented like the marker. A template without any marker is one region, the whole file (an empty
template is a free program). An answer, and the teacher's `reference`, is the text of every
region in order, cut by lines `@@next` — the "@@next cut". `reference_regions` reads that cut and
`assemble` builds the file that runs. A reference whose cut does not have one part per region
does not fit the template.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import ItemId, QuestionConfig
from quiz_contracts.runner import RunLanguage

EDIT_MARKER = "@@edit"
NEXT_MARKER = "@@next"
CODE_MAX_CASES = 30
CODE_SOURCE_MAX = 100_000


def template_regions(template: str) -> int:
    """How many editable regions a template has (1 when it has no marker)."""
    count = sum(1 for line in template.split("\n") if line.strip() == EDIT_MARKER)
    return count or 1


def reference_regions(template: str, reference: str) -> list[str] | None:
    """The reference cut into the template's regions, or None when it does not fit them."""
    parts: list[list[str]] = [[]]
    for line in reference.split("\n"):
        if line.strip() == NEXT_MARKER:
            parts.append([])
        else:
            parts[-1].append(line)
    regions = ["\n".join(p) for p in parts]
    if len(regions) != template_regions(template):
        return None
    return regions


def assemble(template: str, regions: list[str]) -> str:
    """The source that runs: each `@@edit` line replaced by its region, indented like it."""
    lines = template.split("\n")
    if not any(line.strip() == EDIT_MARKER for line in lines):
        return regions[0] if regions else ""
    out: list[str] = []
    pending = iter(regions)
    for line in lines:
        if line.strip() != EDIT_MARKER:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        region = next(pending, "")
        out.extend(indent + part if part else part for part in region.split("\n"))
    return "\n".join(out)


class CodeCase(WireModel):
    """A test case: the program runs with `stdin` and `args` and must print `expected_stdout`."""

    id: ItemId | None = None
    name: str = Field(min_length=1, max_length=200)
    stdin: str = ""
    args: list[str] = Field(default_factory=list)
    visible: bool = Field(default=True, description="Shown to the student; else hidden.")
    expected_stdout: str = Field(default="", description="Settled from the reference.")
    expected_exit_code: int = 0


class CodeProgram(QuestionConfig):
    """What code and codeimage share: the language, the template and the reference."""

    language: RunLanguage
    template: str = Field(default="", max_length=CODE_SOURCE_MAX)
    reference: str = Field(min_length=1, max_length=CODE_SOURCE_MAX, description="The key.")

    @model_validator(mode="after")
    def _reference_fits(self) -> CodeProgram:
        if reference_regions(self.template, self.reference) is None:
            raise ValueError("reference: does not fit the template's editable regions")
        return self

    def source(self) -> str:
        """The reference program, assembled into the template."""
        regions = reference_regions(self.template, self.reference) or [self.reference]
        return assemble(self.template, regions)


class CodeConfig(CodeProgram):
    """A programming question checked by test cases."""

    cases: list[CodeCase] = Field(min_length=1, max_length=CODE_MAX_CASES)

    @model_validator(mode="after")
    def _case_names_unique(self) -> CodeConfig:
        names = [c.name.strip() for c in self.cases]
        if len(set(names)) != len(names):
            raise ValueError("cases: two cases have the same name")
        ids = [c.id for c in self.cases if c.id is not None]
        if len(set(ids)) != len(ids):
            raise ValueError("cases: duplicate id")
        return self


def code_to_student(config: CodeConfig) -> dict[str, Any]:
    """Statement, language, template and the visible cases; hidden cases are only counted."""
    return {
        "prompt": config.prompt,
        "language": config.language.value,
        "template": config.template,
        "cases": [
            {
                "name": c.name,
                "stdin": c.stdin,
                "args": list(c.args),
                "expected_stdout": c.expected_stdout,
                "expected_exit_code": c.expected_exit_code,
            }
            for c in config.cases
            if c.visible
        ],
        "hidden_cases": sum(1 for c in config.cases if not c.visible),
    }


def code_to_solution(config: CodeConfig) -> dict[str, Any]:
    """The reference and every case."""
    return {"reference": config.reference, "cases": [c.model_dump() for c in config.cases]}
