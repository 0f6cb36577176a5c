"""Pictures of codeimage: read `width × height` integers in a palette from a program's output.

The rule is the platform's (heig-quiz `packages/qt-code/src/image/pixels.ts`, `parseImageOutput`):
the output is split on runs of ASCII whitespace; the first width × height tokens are the pixels,
row-major; a token that is not an integer within the palette's range is an invalid pixel; pixels
the output never reached are missing; tokens after the last pixel are counted as extra and
ignored. The picture leaves in the compact encoding of `quiz_contracts.pictures`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from quiz_contracts.pictures import PALETTE_MAX, encode_pixels
from quiz_contracts.runner import Picture, PictureSpec

# `^[+-]?\d+$` on ASCII digits. Leading zeros are fine ("007" is 7), so the value is read
# after them: a thousand-digit token is refused by its length, never handed to int().
_INTEGER = re.compile(rb"^[+-]?([0-9]+)$")


@dataclass(frozen=True)
class ParsedPicture:
    """width × height values (None: invalid or missing) and the counts of what went wrong."""

    pixels: list[int | None]
    missing: int
    invalid: int
    extra: int


def _value(token: bytes, top: int) -> int | None:
    match = _INTEGER.match(token)
    if match is None:
        return None
    digits = match.group(1).lstrip(b"0") or b"0"
    if len(digits) > 3:  # over 999: outside every palette
        return None
    value = int(digits)
    if token.startswith(b"-") and value != 0:
        return None  # "-0" is 0, as Number("-0") is
    return value if value <= top else None


def parse_picture(data: bytes, width: int, height: int, palette: str) -> ParsedPicture:
    """Read a program's output as a picture; never raises on hostile input."""
    count = width * height
    top = PALETTE_MAX[palette]
    tokens = data.split()  # ASCII whitespace: space, \t, \n, \v, \f, \r
    pixels = [_value(token, top) for token in tokens[:count]]
    invalid = sum(1 for value in pixels if value is None)
    missing = count - len(pixels)
    pixels.extend([None] * missing)
    return ParsedPicture(pixels, missing, invalid, max(0, len(tokens) - count))


def _error(parsed: ParsedPicture, empty: bool) -> str | None:
    if empty:
        return "no picture output"
    parts = []
    if parsed.invalid:
        parts.append(f"{parsed.invalid} pixels invalid (not an integer of the palette)")
    if parsed.missing:
        parts.append(f"{parsed.missing} pixels missing (the output stopped early)")
    return "; ".join(parts) or None


def make_picture(data: bytes, spec: PictureSpec) -> Picture:
    """The wire Picture of a program's output, read against the spec."""
    parsed = parse_picture(data, spec.width, spec.height, spec.palette)
    return Picture(
        width=spec.width,
        height=spec.height,
        palette=spec.palette,
        pixels=encode_pixels(parsed.pixels, spec.palette),
        missing_pixels=parsed.missing,
        invalid_pixels=parsed.invalid,
        extra_tokens=parsed.extra,
        error=_error(parsed, not data.strip()),
    )


def picture_output_floor(spec: PictureSpec) -> int:
    """Output bytes a picture may need: 3 digits and a separator a pixel, plus slack.

    The case's output (or file) limit is raised to this, so a picture is never cut by the
    default limits; a program that prints far more is still cut and its picture is not a target.
    """
    return spec.width * spec.height * 4 + 4096
