"""codeimage: the student writes a program that draws a picture equal to the target.

The program follows the runner's picture protocol (quiz_contracts.runner: a PPM on stdout) and
uses the template format of `code`. The target is shown to the student: it is the task, not the
key. The key is the reference program.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.code import CodeProgram

PICTURE_MAX_SIDE = 1024


class TargetPicture(WireModel):
    """The picture to reproduce, as the runner returns it (PNG, canonical-pixel hash)."""

    format: Literal["png"] = "png"
    width: int = Field(gt=0, le=PICTURE_MAX_SIDE)
    height: int = Field(gt=0, le=PICTURE_MAX_SIDE)
    data: str = Field(min_length=1, description="PNG, base64.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class CodeImageConfig(CodeProgram):
    """A drawing program question; `target` is settled from the reference."""

    width: int = Field(default=64, gt=0, le=PICTURE_MAX_SIDE)
    height: int = Field(default=64, gt=0, le=PICTURE_MAX_SIDE)
    target: TargetPicture | None = None

    @model_validator(mode="after")
    def _target_size(self) -> CodeImageConfig:
        if self.target is not None and (self.target.width, self.target.height) != (
            self.width,
            self.height,
        ):
            raise ValueError("target: not the size of the picture")
        return self


def codeimage_to_student(config: CodeImageConfig) -> dict[str, Any]:
    """Statement, language, template, size and the target to reproduce."""
    return {
        "prompt": config.prompt,
        "language": config.language.value,
        "template": config.template,
        "width": config.width,
        "height": config.height,
        "target": config.target.model_dump() if config.target else None,
    }


def codeimage_to_solution(config: CodeImageConfig) -> dict[str, Any]:
    """The reference program."""
    return {"reference": config.reference}
