"""The VAKT activity closes its section: W_VAKT_NOT_LAST when a VAKT block has a block of
another kind after it (FACTS B)."""

from __future__ import annotations

from quiz_lesson_fix.domain.checks.codes import Findings, declare
from quiz_lesson_fix.domain.checks.reading import Section

VAKT_NOT_LAST = declare(
    "W_VAKT_NOT_LAST",
    "quick",
    "A VAKT block is followed by a block that is not VAKT.",
    "sectionId",
)
CODES = (VAKT_NOT_LAST,)


def check_vakt(ctx: Section, out: Findings) -> None:
    """The section's first VAKT block that has a block of another kind somewhere after it."""
    if not ctx.vakt:
        return
    vakt = set(ctx.vakt)
    last_other = next((i for i in range(len(ctx.blocks) - 1, -1, -1) if i not in vakt), -1)
    misplaced = next((i for i in ctx.vakt if i < last_other), -1)
    if misplaced == -1:
        return
    out.add(
        VAKT_NOT_LAST,
        ctx.id,
        ctx.number,
        f"{ctx.label} has a VAKT activity at block {misplaced + 1} with other blocks after "
        "it. Move the activity to the end of the section, after its questions.",
        block_id=ctx.blocks[misplaced].get("id"),
    )
