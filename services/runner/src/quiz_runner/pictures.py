"""Pictures of codeimage: decode a PPM against the expected size, count bad pixels, encode PNG."""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass

from PIL import Image

from quiz_contracts.runner import Picture

_WHITESPACE = b" \t\n\r\x0b\x0c"


@dataclass
class Decoded:
    """Pixels of exactly the expected size plus what went wrong."""

    width: int
    height: int
    rgb: bytearray  # width*height*3, missing and invalid pixels are black
    missing: int
    invalid: int
    error: str | None


def _tokens(data: bytes, start: int, count: int) -> tuple[list[bytes], int]:
    """Up to `count` whitespace-separated tokens from `start`, skipping '#' comments."""
    out: list[bytes] = []
    i, n = start, len(data)
    while len(out) < count and i < n:
        c = data[i : i + 1]
        if c in (b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c"):
            i += 1
        elif c == b"#":
            while i < n and data[i : i + 1] not in (b"\n", b"\r"):
                i += 1
        else:
            j = i
            while j < n and data[j] not in _WHITESPACE and data[j : j + 1] != b"#":
                j += 1
            out.append(data[i:j])
            i = j
    return out, i


def decode_ppm(data: bytes, width: int, height: int) -> Decoded:
    """Decode P6/P3 `data` into a width×height canvas; never raises on hostile input."""
    total = width * height
    rgb = bytearray(total * 3)
    magic = data[:2]
    if magic not in (b"P6", b"P3"):
        if not data:
            return Decoded(width, height, rgb, total, 0, "no picture output")
        return Decoded(width, height, rgb, 0, total, "not a PPM (P6 or P3) picture")
    header, pos = _tokens(data, 2, 3)
    try:
        w, h, maxval = (int(t) for t in header)
    except ValueError:
        return Decoded(width, height, rgb, 0, total, "bad PPM header")
    if not (0 < w <= 65535 and 0 < h <= 65535 and 0 < maxval <= 255):
        return Decoded(width, height, rgb, 0, total, "bad PPM header (size or maxval)")
    errors: list[str] = []
    if (w, h) != (width, height):
        errors.append(f"picture is {w}x{h}, expected {width}x{height}")
    if magic == b"P6" and not errors and maxval == 255 and len(data) - pos - 1 >= total * 3:
        # The common case, a well-formed 8-bit picture of the right size: no per-pixel loop.
        rgb[:] = data[pos + 1 : pos + 1 + total * 3]
        return Decoded(width, height, rgb, 0, 0, None)
    # Samples in the picture's own row-major order, as ints (-1: not a number).
    if magic == b"P6":
        body = data[pos + 1 :]  # exactly one whitespace byte ends the header
        samples: list[int] = list(body[: w * h * 3])
    else:
        toks, _ = _tokens(data, pos, w * h * 3)
        samples = [int(t) if t.isdigit() else -1 for t in toks]
    missing = invalid = 0
    for y in range(height):
        for x in range(width):
            k = (y * w + x) * 3
            if x >= w or y >= h or k + 3 > len(samples):
                missing += 1
                continue
            px = samples[k : k + 3]
            if any(v < 0 or v > maxval for v in px):
                invalid += 1
                continue
            o = (y * width + x) * 3
            rgb[o : o + 3] = bytes(v * 255 // maxval for v in px)
    if missing:
        errors.append(f"{missing} pixels missing")
    if invalid:
        errors.append(f"{invalid} pixels invalid (over maxval {maxval} or not a number)")
    return Decoded(width, height, rgb, missing, invalid, "; ".join(errors) or None)


def pixels_sha256(width: int, height: int, rgb: bytes | bytearray) -> str:
    """Stable hash of the canonical pixels, independent of any PNG encoder."""
    return hashlib.sha256(f"RGB8 {width} {height}\n".encode() + bytes(rgb)).hexdigest()


def encode_png(width: int, height: int, rgb: bytes | bytearray) -> bytes:
    """PNG of the RGB pixels."""
    buf = io.BytesIO()
    Image.frombytes("RGB", (width, height), bytes(rgb)).save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def make_picture(data: bytes, width: int, height: int) -> Picture:
    """The wire Picture of a program's PPM output."""
    d = decode_ppm(data, width, height)
    return Picture(
        width=width,
        height=height,
        data=base64.b64encode(encode_png(width, height, d.rgb)).decode(),
        sha256=pixels_sha256(width, height, d.rgb),
        missing_pixels=d.missing,
        invalid_pixels=d.invalid,
        error=d.error,
    )
