"""One run of the lesson checks: the phases in the tool's order, over one shared reading.

    sections = [Section(i, raw) ...]          # each read once (or taken over: `reuse`)
    out = Findings(section ids)               # the one sink, in check order
    per section: questions, leaks, shape, spelling        # questions.py … spelling.py
    lesson-wide: spelling across sections, answer reuse, number duplicates
    per section: vakt                                     # vakt.py
    per section: formatting                               # formatting.py
    lesson-wide: citations, then the section count        # citations.py, shape.py
    → CheckResult(errors, warnings)

Every check is a function of the reading and the sink (`check(section, out)` or
`check(sections, …, out)`); none keeps state between runs. A section's own phases ("first",
"vakt", "formatting") are what a later run with `reuse` takes over when the section is the
very same object at the same place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.checks import (
    answers,
    citations,
    formatting,
    leaks,
    questions,
    shape,
    spelling,
    vakt,
)
from quiz_lesson_fix.domain.checks.codes import Findings
from quiz_lesson_fix.domain.checks.reading import Section

SectionCheck = Callable[[Section, Findings], None]
Phase = Literal["first", "vakt", "formatting"]

# A section's own checks run before the lesson-wide ones, in this order.
FIRST_CHECKS: tuple[SectionCheck, ...] = (
    questions.check_questions,
    leaks.check_leaks,
    shape.check_shape,
    spelling.check_spelling,
)


@dataclass(frozen=True, slots=True)
class SectionRun:
    """What the checks made of one section, reusable while the section is the same object.

    `raw` is the section as read; `ctx` its reading (with its share of the answer pool);
    `first` the findings of its own checks run before the lesson-wide ones (questions, leaks,
    shape, spelling), `vakt` and `formatting` those run after.
    """

    raw: Any
    ctx: Section
    first: list[Finding]
    vakt: list[Finding]
    formatting: list[Finding]


@dataclass(frozen=True)
class CheckResult:
    """`validateLesson`'s result: errors and warnings, each in check order."""

    errors: list[Finding]
    warnings: list[Finding]
    # Per section, in order: what `validate_lesson(..., reuse=this)` may take over.
    sections: tuple[SectionRun, ...] = field(default=(), repr=False, compare=False)

    @property
    def findings(self) -> list[Finding]:
        """Errors, then warnings."""
        return [*self.errors, *self.warnings]

    def find(self, key: str) -> Finding | None:
        """The finding with this key, or None."""
        return next((f for f in self.findings if f.key == key), None)


def validate_lesson(doc: Mapping[str, Any], *, reuse: CheckResult | None = None) -> CheckResult:
    """Every check on a lesson: `{errors, warnings}` as the tool's validateLesson gives them.

    `reuse` is the result of an earlier run on a lesson this one was derived from without
    changing anything in place (as `apply_fix_operations` derives a fix): a section that is the
    very same object at the same place keeps that run's reading and its own findings, and only
    changed sections and the lesson-wide checks run again. The result is the same as without
    `reuse`; checkFix's "after" of a one-section fix costs a fraction of a full pass.
    """
    found = doc.get("sections") if isinstance(doc, dict) else None
    raw_sections: list[Any] = found if isinstance(found, list) else []
    runs = reuse.sections if reuse is not None else ()
    reused: list[SectionRun | None] = [
        runs[i] if i < len(runs) and runs[i].raw is raw and isinstance(raw, dict) else None
        for i, raw in enumerate(raw_sections)
    ]
    sections = [
        run.ctx if run is not None else Section(i, raw if isinstance(raw, dict) else {})
        for i, (raw, run) in enumerate(zip(raw_sections, reused, strict=True))
    ]
    out = Findings([s.section_id for s in sections])

    first = _per_section(sections, reused, "first", _first_checks, out)
    pool = [answer for ctx in sections for answer in ctx.answers]
    spelling.check_spelling_across(sections, pool, out)
    answers.check_answer_reuse(pool, out)
    answers.check_number_duplicates(sections, out)
    vakt_found = _per_section(sections, reused, "vakt", vakt.check_vakt, out)
    formatting_found = _per_section(
        sections, reused, "formatting", formatting.check_formatting, out
    )
    citations.check_citations(doc, sections, out)
    shape.check_section_count(sections, out)

    return CheckResult(
        [f for f in out.items if f.level == "error"],
        [f for f in out.items if f.level == "warning"],
        tuple(
            SectionRun(raw, ctx, first[i], vakt_found[i], formatting_found[i])
            for i, (raw, ctx) in enumerate(zip(raw_sections, sections, strict=True))
        ),
    )


def _first_checks(ctx: Section, out: Findings) -> None:
    for check in FIRST_CHECKS:
        check(ctx, out)


def _per_section(
    sections: list[Section],
    reused: Sequence[SectionRun | None],
    phase: Phase,
    check: SectionCheck,
    out: Findings,
) -> list[list[Finding]]:
    """One phase over every section: each section's findings taken over from a reused run,
    or checked; returns them per section."""
    per_section: list[list[Finding]] = []
    for ctx, run in zip(sections, reused, strict=True):
        if run is not None:
            taken: list[Finding] = getattr(run, phase)
            out.extend(taken)
            per_section.append(taken)
            continue
        start = len(out.items)
        check(ctx, out)
        per_section.append(out.items[start:])
    return per_section


def new_findings(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """The findings of `after` whose key is not among the keys of `before` (newFindings)."""
    known = {f.key for f in before}
    return [f for f in after if f.key not in known]
