"""Pictures of codeimage: the palettes and the compact pixel string the platform stores.

heig-quiz `packages/qt-code/src/image/pixels.ts` and `image/schema.ts`: a picture is
`width × height` palette values, row-major from the top left. It is stored and shipped as ONE
string, one lowercase hex digit per pixel for `bw` (0 black, 1 white) and `color16` (0–15, the
CGA colours), two for `gray256` (0–255 grey levels); a pixel that holds no valid value (invalid
or missing) is `x` (`xx` in gray256). A 4 × 3 bw picture is a 12-character string such as
`"111101111011"`. The runner's picture reply and codeimage's `target` share this encoding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

Palette = Literal["bw", "color16", "gray256"]
PALETTES: tuple[Palette, ...] = ("bw", "color16", "gray256")

# The largest value of each palette; the smallest is always 0.
PALETTE_MAX: dict[str, int] = {"bw": 1, "color16": 15, "gray256": 255}

# image/schema.ts: a side of the picture is 3..128 cells.
IMAGE_MIN_SIDE = 3
IMAGE_MAX_SIDE = 128

_HEX = re.compile(r"^[0-9a-f]+$")


def chars_per_pixel(palette: str) -> int:
    """Characters one pixel takes in the compact string: 2 for gray256, else 1."""
    return 2 if palette == "gray256" else 1


def encode_pixels(pixels: Sequence[int | None], palette: str) -> str:
    """Pixels (None: no valid value) → the compact string; out-of-range values become `x`."""
    width = chars_per_pixel(palette)
    top = PALETTE_MAX[palette]
    invalid = "x" * width
    return "".join(
        invalid if value is None or not 0 <= value <= top else format(value, f"0{width}x")
        for value in pixels
    )


def decode_pixels(encoded: str, palette: str, count: int) -> list[int | None]:
    """The compact string → `count` pixels; anything unreadable (or past its end) is None."""
    width = chars_per_pixel(palette)
    top = PALETTE_MAX[palette]
    out: list[int | None] = []
    for i in range(count):
        chunk = encoded[i * width : i * width + width]
        value = int(chunk, 16) if len(chunk) == width and _HEX.match(chunk) else None
        out.append(value if value is not None and value <= top else None)
    return out


def image_string_issue(
    encoded: str, width: int, height: int, palette: str
) -> Literal["target_size", "target_value"] | None:
    """Why a compact string is not a full picture of that size and palette, else None."""
    count = width * height
    if len(encoded) != count * chars_per_pixel(palette):
        return "target_size"
    if any(value is None for value in decode_pixels(encoded, palette, count)):
        return "target_value"
    return None
