"""PPM decoding against the expected size, bad pixel counts, PNG and the stable hash."""

from __future__ import annotations

import base64
import io

from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from quiz_runner.pictures import decode_ppm, make_picture, pixels_sha256


def p6(w: int, h: int, pixels: bytes, maxval: int = 255) -> bytes:
    return f"P6\n{w} {h}\n{maxval}\n".encode() + pixels


def test_well_formed_p6() -> None:
    px = bytes(range(12))
    d = decode_ppm(p6(2, 2, px), 2, 2)
    assert (d.missing, d.invalid, d.error) == (0, 0, None)
    assert bytes(d.rgb) == px


def test_p3_with_comments_and_maxval_scaling() -> None:
    data = b"P3\n# a comment\n2 1 # inline\n15\n15 0 0   0 15 7\n"
    d = decode_ppm(data, 2, 1)
    assert (d.missing, d.invalid) == (0, 0)
    assert bytes(d.rgb) == bytes([255, 0, 0, 0, 255, 7 * 255 // 15])


def test_short_data_counts_missing_pixels() -> None:
    d = decode_ppm(p6(2, 2, bytes(6 + 2)), 2, 2)
    assert d.missing == 2 and d.invalid == 0 and "missing" in (d.error or "")


def test_values_over_maxval_and_junk_tokens_are_invalid() -> None:
    d = decode_ppm(b"P3 2 1 100 101 0 0 x 1 1", 2, 1)
    assert d.invalid == 2 and d.missing == 0


def test_p6_bytes_over_a_small_maxval_are_invalid() -> None:
    d = decode_ppm(p6(2, 1, bytes([1, 2, 3, 200, 0, 0]), maxval=100), 2, 1)
    assert (d.invalid, d.missing) == (1, 0)


def test_smaller_picture_leaves_missing_pixels_and_larger_is_cut() -> None:
    small = decode_ppm(p6(1, 1, b"\x01\x02\x03"), 2, 2)
    assert small.missing == 3 and "1x1" in (small.error or "")
    big = decode_ppm(p6(3, 3, bytes(range(27))), 2, 2)
    assert big.missing == 0 and big.invalid == 0 and "3x3" in (big.error or "")
    assert bytes(big.rgb[:6]) == bytes(range(6)) and bytes(big.rgb[6:9]) == bytes(range(9, 12))


def test_not_a_ppm_and_empty_output() -> None:
    assert decode_ppm(b"hello", 3, 2).invalid == 6
    assert decode_ppm(b"", 3, 2).missing == 6
    assert decode_ppm(b"P6 0 0 255\n", 3, 2).invalid == 6
    assert decode_ppm(b"P6 2 2 65535\n", 2, 2).invalid == 4


def test_png_round_trip_and_hash_is_of_the_pixels() -> None:
    px = bytes([10, 20, 30] * 6)
    pic = make_picture(p6(3, 2, px), 3, 2)
    image = Image.open(io.BytesIO(base64.b64decode(pic.data)))
    assert image.size == (3, 2) and image.mode == "RGB" and image.tobytes() == px
    assert pic.sha256 == pixels_sha256(3, 2, px)
    # The same pixels in P3 give the same hash: it does not depend on the encoding.
    p3 = b"P3 3 2 255 " + b" ".join(b"10 20 30" for _ in range(6))
    assert make_picture(p3, 3, 2).sha256 == pic.sha256


@given(st.binary(max_size=300), st.integers(1, 8), st.integers(1, 8))
def test_hostile_input_never_raises_and_counts_stay_in_range(data: bytes, w: int, h: int) -> None:
    for prefix in (b"", b"P6 ", b"P3 ", f"P6 {w} {h} 255\n".encode()):
        d = decode_ppm(prefix + data, w, h)
        assert 0 <= d.missing + d.invalid <= w * h
        assert len(d.rgb) == w * h * 3
