"""codeimage: propose the reference; settle makes the picture it draws the target (ADR-059 §2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from quiz_contracts.errors import ErrorCode
from quiz_contracts.generate import Incomplete
from quiz_contracts.questions.code import CODE_SOURCE_MAX
from quiz_contracts.questions.codeimage import CodeImageConfig
from quiz_contracts.runner import PictureSpec, RunCase, RunReply, RunRequest
from quiz_editor_assist.generators.base import (
    BaseGenerator,
    Proposal,
    copy_draft,
    is_empty,
)
from quiz_editor_assist.generators.code import compile_incomplete, merge_reference, program_files

PICTURE_CASE = "picture"


class CodeImageProposal(Proposal):
    """The reference program only: the target is drawn by running it."""

    reference: str = Field(
        default="",
        max_length=CODE_SOURCE_MAX,
        description="The solution: the text of each editable region of the template, in order, "
        "separated by lines '@@next'; the whole program when the template has no '@@edit'.",
    )


INSTRUCTIONS = """\
Propose the reference solution (`reference`) of this drawing question: a program that writes \
the picture the statement describes to standard output as a PPM image (header 'P3' or 'P6', then \
the width and the height of the config, then 255, then one RGB triple per pixel, row by row \
from the top left). Follow the template: each line '@@edit' is a region; the reference is the \
text of each region in order, separated by lines '@@next'; with no '@@edit' it is the whole \
program. In Java the public class is Main. The target picture is computed by running it.\
"""


def merge_codeimage_proposal(config: dict[str, Any], proposal: dict[str, Any]) -> dict[str, Any]:
    """Write the reference as for code: only when empty and when it fits the template."""
    merged = copy_draft(config)
    merge_reference(merged, proposal)
    return merged


def codeimage_settle_plan(config: Mapping[str, Any]) -> RunRequest | None:
    """Run the reference once to draw the target; None when the draft has a target."""
    program = CodeImageConfig.model_validate(dict(config))
    if program.target is not None or not is_empty(config.get("target")):
        return None
    return RunRequest(
        language=program.language.value,
        files=program_files(program),
        cases=[RunCase(name=PICTURE_CASE)],
        picture=PictureSpec(width=program.width, height=program.height),
    )


def codeimage_settle_apply(
    config: dict[str, Any], reply: RunReply
) -> tuple[dict[str, Any], list[Incomplete]]:
    """The drawn picture becomes the target when complete: no missing, no invalid pixel."""
    settled = copy_draft(config)
    if not reply.compile.ok:
        return settled, [compile_incomplete(reply)]
    if not is_empty(settled.get("target")):
        return settled, []  # the teacher's target wins, even one set since the plan
    # The picture is the one the first (only) case drew; a cut or timed-out run is not a target.
    result = reply.cases[0] if reply.cases else None
    picture = reply.picture
    if picture is None or (result is not None and not result.completed):
        return settled, [
            Incomplete(code=ErrorCode.partial, message="The reference drew no complete picture.")
        ]
    if picture.missing_pixels or picture.invalid_pixels:
        why = picture.error or "the picture is incomplete"
        return settled, [
            Incomplete(
                code=ErrorCode.partial,
                message=f"No target: {picture.missing_pixels} missing and "
                f"{picture.invalid_pixels} invalid pixels ({why}).",
            )
        ]
    settled["target"] = {
        "format": picture.format,
        "width": picture.width,
        "height": picture.height,
        "data": picture.data,
        "sha256": picture.sha256,
    }
    return settled, []


class CodeImageGenerator(BaseGenerator):
    """The drawing-question wand; settle draws the target."""

    type_name = "codeimage"
    instructions = INSTRUCTIONS
    proposal_schema = CodeImageProposal
    has_settle = True

    merge = staticmethod(merge_codeimage_proposal)

    def settle_plan(self, config: Mapping[str, Any]) -> RunRequest | None:
        """See codeimage_settle_plan."""
        return codeimage_settle_plan(config)

    def settle_apply(
        self, config: dict[str, Any], reply: RunReply
    ) -> tuple[dict[str, Any], list[Incomplete]]:
        """See codeimage_settle_apply."""
        return codeimage_settle_apply(config, reply)
