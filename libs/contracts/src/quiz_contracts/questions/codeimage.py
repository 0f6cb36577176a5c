"""codeimage: the student writes a program that draws a picture equal to the target.

heig-quiz `packages/qt-code/src/image/schema.ts` (CODEIMAGE_CONFIG_VERSION 1), `image/server.ts`
and `image/pixels.ts`. The program half is code's (`program.py`). The program prints
`width × height` integers on stdout, separated by any whitespace, row by row from the top left,
in the image's palette: bw 0 (black) or 1 (white), color16 0–15, gray256 0–255. The target is
that picture in the compact encoding of `quiz_contracts.pictures`, with the size and palette it
was captured under; it is published to the student on purpose (drawing it is the exercise).

Draft:

    {"configVersion": 1, "prompt": "Dessinez un carré blanc bordé de noir.",
     "language": "python", "referenceSolution": "",
     "image": {"width": 3, "height": 3, "palette": "bw"}, "target": null}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from quiz_contracts.pictures import (
    IMAGE_MAX_SIDE,
    IMAGE_MIN_SIDE,
    Palette,
    decode_pixels,
    image_string_issue,
)
from quiz_contracts.questions.common import (
    DraftBudget,
    PlatformModel,
    StudentView,
    Utf16,
    int_in,
)
from quiz_contracts.questions.program import (
    PROGRAM_TEXT_MAX,
    CodeLimits,
    ProgramConfig,
    program_student,
)

CODEIMAGE_CONFIG_VERSION = 1
# The one run of a picture: empty stdin, no command line.
IMAGE_CASE = "image"
# Two characters per pixel of the largest gray256 picture.
MAX_IMAGE_CHARS = 2 * IMAGE_MAX_SIDE * IMAGE_MAX_SIDE

Side = Annotated[int, int_in(IMAGE_MIN_SIDE, IMAGE_MAX_SIDE)]


class ImageSpec(PlatformModel):
    """The picture's size (3..128 a side) and palette."""

    width: Side
    height: Side
    palette: Palette


class ImageTarget(ImageSpec):
    """A captured picture: its pixels AND the size and palette they were captured under."""

    pixels: Annotated[str, Utf16(0, MAX_IMAGE_CHARS)]

    def fits(self, image: ImageSpec) -> bool:
        """Captured under exactly this image's size and palette (else it is stale)."""
        return (self.width, self.height, self.palette) == (image.width, image.height, image.palette)


class CodeImageLimits(CodeLimits):
    """code's limits with room for the largest picture on stdout (128 KiB)."""

    output_kb: Annotated[int, int_in(1, 256)] = 128


class CodeImageConfig(ProgramConfig):
    """A drawing-program question. A stale or missing target is a valid DRAFT (publication
    requires a fitting one, `codeimage.target_missing|target_size|target_value`)."""

    config_version: Literal[1]
    limits: CodeImageLimits = Field(default_factory=CodeImageLimits)
    image: ImageSpec
    target: ImageTarget | None = None


def target_pixels(config: CodeImageConfig) -> list[int | None] | None:
    """The target's pixels when one fits the image and holds no invalid pixel, else None."""
    target = config.target
    if target is None or not target.fits(config.image):
        return None
    image = config.image
    if image_string_issue(target.pixels, image.width, image.height, image.palette) is not None:
        return None
    return decode_pixels(target.pixels, image.palette, image.width * image.height)


def publication_issues(config: CodeImageConfig) -> list[str]:
    """What publication refuses beyond the schema: the i18n keys of a missing or bad target."""
    if config.target is None:
        return ["codeimage.target_missing"]
    if not config.target.fits(config.image):
        return ["codeimage.target_size"]
    image = config.image
    issue = image_string_issue(config.target.pixels, image.width, image.height, image.palette)
    return [] if issue is None else [f"codeimage.{issue}"]


def empty_codeimage_draft() -> dict[str, Any]:
    """`emptyCodeImageConfig()`: C, 16 × 16 black and white, no target (D16)."""
    return {
        "configVersion": CODEIMAGE_CONFIG_VERSION,
        "prompt": "",
        "language": "c",
        "runtime": "runno",
        "cooldown": "fixed",
        "template": "",
        "files": [],
        "action": "run",
        "compileArgs": "",
        "limits": {"timeMs": 2000, "memoryMb": 128, "outputKb": 128},
        "runsPerMinute": 10,
        "referenceSolution": "",
        "image": {"width": 16, "height": 16, "palette": "bw"},
        "target": None,
    }


def codeimage_to_student(config: CodeImageConfig, view: StudentView) -> dict[str, Any]:
    """The program half, the image's size and palette, and the target to reproduce."""
    return {
        **program_student(config),
        "image": config.image.wire(),
        "target": config.target.wire() if config.target is not None else None,
    }


def codeimage_to_solution(config: CodeImageConfig) -> dict[str, Any]:
    """`{referenceSolution, image, target}`."""
    return {
        "referenceSolution": config.reference_solution,
        "image": config.image.wire(),
        "target": config.target.wire() if config.target is not None else None,
    }


CODEIMAGE_BUDGET = DraftBudget(text=PROGRAM_TEXT_MAX + MAX_IMAGE_CHARS + 2_048, values=128)
