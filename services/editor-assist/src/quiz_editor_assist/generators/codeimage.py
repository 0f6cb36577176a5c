"""codeimage: propose the reference; settle makes the picture it draws the target (§2).

heig-quiz `packages/qt-code/src/image/generate.ts` (`settleCodeImage`): the reference is merged
as for code; settle runs it once (case `image`, empty stdin) when the draft has no target, reads
its stdout as `width × height` integers in the image's palette (the runner's picture protocol,
`quiz_contracts.runner`), and writes `{width, height, palette, pixels}` as the target only when
the run was not cut short and no pixel is missing or invalid; otherwise `partial`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from quiz_contracts.errors import ErrorCode
from quiz_contracts.generate import Incomplete
from quiz_contracts.questions.codeimage import IMAGE_CASE, CodeImageConfig
from quiz_contracts.questions.program import RUNNER_LANGUAGE
from quiz_contracts.runner import PictureSpec, RunCase, RunReply, RunRequest
from quiz_editor_assist.generators.base import BaseGenerator, SettlePlan, copy_draft
from quiz_editor_assist.generators.code import (
    REFERENCE_RULES,
    compile_incomplete,
    merge_reference,
    program_files,
    run_limits,
    usable_run,
)


class CodeImageProposal(BaseModel):
    """The reference program only: the target is drawn by running it."""

    referenceSolution: str = Field(  # the platform's field name
        description="The program that draws the picture: the EDITABLE regions, in order."
    )


INSTRUCTIONS = f"""\
The question asks for a program that DRAWS a picture by printing its pixels on stdout: \
`image.width` times `image.height` integers separated by whitespace, row by row from the top \
left; `image.palette` says their range: `bw` 0 (black) or 1 (white), `color16` 0 to 15 (the CGA \
colours), `gray256` 0 to 255. Propose `referenceSolution`, the program that draws exactly the \
picture the statement describes. {REFERENCE_RULES}\
"""


def merge_codeimage_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Write the reference as for code: only when blank and when it fits the template."""
    merged = copy_draft(config)
    merge_reference(merged, proposal)
    return merged


def codeimage_settle_plan(config: CodeImageConfig) -> SettlePlan | None:
    """Run the reference once to draw the target; None with a target or no runnable reference."""
    regions = config.regions()
    if regions is None or config.target is not None:
        return None
    image = config.image
    request = RunRequest(
        language=RUNNER_LANGUAGE[config.language],
        files=program_files(config, regions),
        cases=[RunCase(name=IMAGE_CASE)],
        limits=run_limits(config.limits, []),
        picture=PictureSpec(width=image.width, height=image.height, palette=image.palette),
    )
    return SettlePlan(request=request)


def codeimage_settle_apply(
    draft: dict[str, Any], plan: SettlePlan, reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """The drawn picture becomes the target when whole: no missing, no invalid pixel."""
    if not reply.compile.ok:
        return draft, [compile_incomplete(reply)]
    run = reply.cases[0] if reply.cases else None
    picture = reply.picture
    if not usable_run(run) or picture is None:
        return draft, [
            Incomplete(
                code=ErrorCode.partial,
                message="The reference drew no complete picture: it timed out, ran out of "
                "memory or printed too much.",
            )
        ]
    if not picture.complete:
        why = picture.error or "the picture is incomplete"
        return draft, [
            Incomplete(
                code=ErrorCode.partial,
                message=f"No target: {picture.missing_pixels} missing and "
                f"{picture.invalid_pixels} invalid pixels ({why}).",
            )
        ]
    settled = copy_draft(draft)
    settled["target"] = {
        "width": picture.width,
        "height": picture.height,
        "palette": picture.palette,
        "pixels": picture.pixels,
    }
    return settled, []


class CodeImageGenerator(BaseGenerator):
    """The drawing-question wand; settle draws the target."""

    type_name = "codeimage"
    instructions = INSTRUCTIONS
    proposal_schema = CodeImageProposal
    has_settle = True

    merge = staticmethod(merge_codeimage_proposal)

    def settle_plan(self, config: Any) -> SettlePlan | None:
        """See codeimage_settle_plan."""
        return codeimage_settle_plan(config)

    def settle_apply(
        self, draft: dict[str, Any], plan: SettlePlan, reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """See codeimage_settle_apply."""
        return codeimage_settle_apply(draft, plan, reply)

    def settle_notice(self, config: Any) -> str | None:
        """A valid draft without a runnable reference and without a target."""
        if (
            isinstance(config, CodeImageConfig)
            and config.target is None
            and config.regions() is None
        ):
            return "No reference solution: the target picture was not drawn."
        return None
