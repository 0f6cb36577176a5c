"""The program half that code and codeimage share: language, locked template, reference.

heig-quiz `packages/qt-code/src/schema.ts` (`programFields`), `reference.ts`, `segments.ts` and
`packages/domain/src/lockedTemplate.ts`.

Template format. The template is the file the student starts from. Locked blocks run from a
`@@lock` line to an `@@endlock` (or `@@unlock`) line; a marker line is a comment of the language
(`// @@lock`, `/* @@lock */`, `# @@lock`) and belongs to the locked block, so the assembled
source still compiles. Everything outside the locked blocks is editable: a template without a
marker is one editable region, a fully locked one has none. A trailing newline does not make an
extra region.

The reference (`referenceSolution`) is the text of every editable region in order. With one
region and no separator it is that region byte for byte; with several, the pieces are cut by a
line that reads `@@next` once trimmed and stripped of one comment opener (`//`, `/*`, `#`) and a
trailing `*/` — the @@next cut. A piece loses the line break its region ends with. An empty
reference fits any template; a cut whose count differs from the regions does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from quiz_contracts.questions.common import (
    PlatformModel,
    Prompt,
    Utf16,
    int_in,
    js_trim,
    utf16_len,
)

CodeLanguage = Literal["c", "cpp", "python", "js", "rust"]
CODE_LANGUAGES: tuple[str, ...] = ("c", "cpp", "python", "js", "rust")

LINE_COMMENT: dict[str, tuple[str, ...]] = {
    "c": ("//", "/*"),
    "cpp": ("//", "/*"),
    "js": ("//", "/*"),
    "rust": ("//",),
    "python": ("#",),
}
ANY_COMMENT: tuple[str, ...] = ("//", "/*", "#")

# The runner's language for each of the platform's (`js` is Node.js there).
RUNNER_LANGUAGE = {"c": "c", "cpp": "cpp", "python": "python", "js": "javascript", "rust": "rust"}
MAIN_FILE = {
    "c": "main.c",
    "cpp": "main.cpp",
    "python": "main.py",
    "js": "main.js",
    "rust": "main.rs",
}

TEMPLATE_MAX = 40_000
REFERENCE_MAX = 40_000
FILE_CONTENT_MAX = 64_000
MAX_FILES = 4
COMPILE_ARGS_MAX = 400

Marker = Literal["lock", "endlock", "next"]


def marker_of(line: str, language: str | None = None) -> Marker | None:
    """The marker a line carries, or None; `language` picks its comment openers (else all)."""
    body = js_trim(line)
    for prefix in LINE_COMMENT.get(language or "", ANY_COMMENT):
        if body.startswith(prefix):
            body = js_trim(body[len(prefix) :])
            break
    if body.endswith("*/"):
        body = js_trim(body[:-2])
    if body == "@@lock":
        return "lock"
    if body in ("@@endlock", "@@unlock"):
        return "endlock"
    if body == "@@next":
        return "next"
    return None


@dataclass(frozen=True)
class Segment:
    """A run of template lines: locked or editable (`index` among the editable ones)."""

    kind: Literal["locked", "editable"]
    index: int | None
    text: str

    def wire(self) -> dict[str, Any]:
        """`{kind, index, text}` as the student view carries it."""
        return {"kind": self.kind, "index": self.index, "text": self.text}


def split_template(template: str, language: str | None) -> list[Segment]:
    """Alternating locked and editable segments; their texts concatenate to the template."""
    lines = template.split("\n")
    count = len(lines) - 1 if len(lines) > 1 and lines[-1] == "" else len(lines)
    kinds: list[tuple[Literal["locked", "editable"], str]] = []
    locked = False
    for i in range(count):
        text = lines[i] if i == len(lines) - 1 else lines[i] + "\n"
        marker = marker_of(lines[i], language)
        if marker == "lock":
            locked = True
        kind: Literal["locked", "editable"] = "locked" if locked else "editable"
        if marker == "endlock":
            locked = False
        if kinds and kinds[-1][0] == kind:
            kinds[-1] = (kind, kinds[-1][1] + text)
        else:
            kinds.append((kind, text))
    segments: list[Segment] = []
    editable = 0
    for kind, text in kinds:
        segments.append(Segment(kind, editable if kind == "editable" else None, text))
        editable += kind == "editable"
    return segments


def editable_regions(template: str, language: str | None) -> list[str]:
    """The editable segments' texts, in order."""
    return [s.text for s in split_template(template, language) if s.kind == "editable"]


def reference_pieces(reference: str) -> list[str]:
    """The reference cut on its `@@next` lines (any comment form), as written."""
    pieces: list[list[str]] = [[]]
    for line in reference.split("\n"):
        if marker_of(line) == "next":
            pieces.append([])
        else:
            pieces[-1].append(line)
    return ["\n".join(p) for p in pieces]


def reference_regions(template: str, language: str | None, reference: str) -> list[str] | None:
    """The reference as one string per editable region, or None when it does not fit.

    A blank reference reads as the template's own editable text (what the editor shows).
    """
    regions = editable_regions(template, language)
    if not regions:
        return [] if not js_trim(reference) else None
    if not js_trim(reference):
        return regions
    pieces = reference_pieces(reference)
    if len(regions) == 1 and len(pieces) == 1:
        return [reference]
    if len(pieces) != len(regions):
        return None
    return [p + "\n" if r.endswith("\n") else p for p, r in zip(pieces, regions, strict=True)]


def assemble_source(template: str, language: str | None, regions: list[str]) -> str:
    """The source that runs: every editable segment replaced by its region, whole lines kept."""
    out: list[str] = []
    for segment in split_template(template, language):
        if segment.kind == "locked" or segment.index is None:
            out.append(segment.text)
            continue
        region = regions[segment.index]
        needs_break = segment.text.endswith("\n") and region != "" and not region.endswith("\n")
        out.append(region + "\n" if needs_break else region)
    return "".join(out)


class CodeLimits(PlatformModel):
    """What one run may take: wall time per case, memory, output."""

    time_ms: Annotated[int, int_in(100, 10_000)] = 2_000
    memory_mb: Annotated[int, int_in(16, 512)] = 128
    output_kb: Annotated[int, int_in(1, 256)] = 64


class CodeFile(PlatformModel):
    """An extra file the program reads; injected server-side, its bytes never shown."""

    name: Annotated[str, Utf16(pattern=r"^[A-Za-z0-9_.-]{1,40}$")]
    content: Annotated[str, Utf16(0, FILE_CONTENT_MAX)]


class ProgramConfig(PlatformModel):
    """`programFields`: what code and codeimage share field for field."""

    prompt: Prompt
    language: CodeLanguage
    runtime: Literal["backend", "runno"] = "backend"
    cooldown: Literal["fixed", "progressive"] = "fixed"
    template: Annotated[str, Utf16(0, TEMPLATE_MAX)] = ""
    files: Annotated[list[CodeFile], Field(max_length=MAX_FILES)] = []
    action: Literal["check", "run"] = "run"
    compile_args: Annotated[str, Utf16(0, COMPILE_ARGS_MAX)] = ""
    limits: CodeLimits = Field(default_factory=CodeLimits)
    runs_per_minute: Annotated[int, int_in(1, 30)] = 10
    # The teacher's own solution: run by "try" and by settle, never sent to a student.
    reference_solution: Annotated[str, Utf16(0, REFERENCE_MAX)] = ""

    def regions(self) -> list[str] | None:
        """The reference cut into the template's regions; None when blank or not fitting."""
        if not js_trim(self.reference_solution):
            return None
        return reference_regions(self.template, self.language, self.reference_solution)

    def source(self, regions: list[str]) -> str:
        """The reference program assembled into the template."""
        return assemble_source(self.template, self.language, regions)


def program_student(config: ProgramConfig) -> dict[str, Any]:
    """The program half of a student view: nothing that could carry the key.

    Gone: the reference, `compileArgs`, the bytes of the extra files (name and size only).
    """
    return {
        "prompt": config.prompt,
        "language": config.language,
        "runtime": config.runtime,
        "cooldown": config.cooldown,
        "segments": [s.wire() for s in split_template(config.template, config.language)],
        "limits": config.limits.wire(),
        "runsPerMinute": config.runs_per_minute,
        "filesPreview": [{"name": f.name, "bytes": utf16_len(f.content)} for f in config.files],
    }


# Characters the program half can hold at most.
PROGRAM_TEXT_MAX = (
    20_000 + TEMPLATE_MAX + REFERENCE_MAX + MAX_FILES * (FILE_CONTENT_MAX + 64) + COMPILE_ARGS_MAX
)
