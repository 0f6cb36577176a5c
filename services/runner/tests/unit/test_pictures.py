"""Pictures as the platform reads them: `width × height` integers in a palette, compact-encoded.

The cases follow heig-quiz `packages/qt-code/src/image/pixels.test.ts` and the codeimage settle
of `generate.test.ts` (a 3 × 3 bw square "111101111"; a picture missing pixels is no target).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quiz_contracts.pictures import PALETTE_MAX, chars_per_pixel, decode_pixels
from quiz_contracts.runner import PictureSpec
from quiz_runner.pictures import make_picture, parse_picture, picture_output_floor


def spec(width: int, height: int, palette: str = "bw") -> PictureSpec:
    return PictureSpec(width=width, height=height, palette=palette)  # type: ignore[arg-type]


def test_a_square_drawn_row_by_row_is_the_platforms_target_string() -> None:
    pic = make_picture(b"1 1 1\n1 0 1\n1 1 1\n", spec(3, 3))
    assert (pic.width, pic.height, pic.palette, pic.pixels) == (3, 3, "bw", "111101111")
    assert (pic.missing_pixels, pic.invalid_pixels, pic.extra_tokens) == (0, 0, 0)
    assert pic.complete and pic.error is None


def test_any_ascii_whitespace_separates_and_layout_does_not_matter() -> None:
    one_line = make_picture(b"0 1 0 1", spec(2, 2)).pixels
    assert make_picture(b"0\t1\r\n0\x0b1\x0c", spec(2, 2)).pixels == one_line == "0101"


def test_palettes_encode_one_hex_digit_or_two() -> None:
    assert make_picture(b"0 15 9 10", spec(2, 2, "color16")).pixels == "0f9a"
    assert make_picture(b"0 255 16 1", spec(2, 2, "gray256")).pixels == "00ff1001"


def test_integers_are_read_as_javascript_numbers_read_them() -> None:
    # "+1", "007" and "-0" are integers of the range; "1.0", "0x1", "2", "-1" are not in bw.
    parsed = parse_picture(b"+1 007 -0 1.0 0x1 2 -1 01", 4, 2, "bw")
    assert parsed.pixels == [1, None, 0, None, None, None, None, 1]
    assert parsed.invalid == 5 and parsed.missing == 0


def test_a_missing_pixel_and_an_out_of_range_value() -> None:
    pic = make_picture(b"1 1 1", spec(3, 3))
    assert pic.pixels == "111xxxxxx"
    assert (pic.missing_pixels, pic.invalid_pixels) == (6, 0) and not pic.complete
    assert "6 pixels missing" in (pic.error or "")
    pic = make_picture(b"0 1 256 3", spec(2, 2, "gray256"))
    assert pic.pixels == "0001xx03" and pic.invalid_pixels == 1


def test_tokens_after_the_last_pixel_are_counted_and_ignored() -> None:
    pic = make_picture(b"1 0 1 0 junk 7 7", spec(2, 2))
    assert pic.pixels == "1010" and pic.extra_tokens == 3 and pic.complete


def test_no_output_and_text_output() -> None:
    empty = make_picture(b"", spec(3, 3))
    assert empty.missing_pixels == 9 and empty.error == "no picture output"
    text = make_picture(b"hello world", spec(1, 2))
    assert (text.invalid_pixels, text.missing_pixels, text.pixels) == (2, 0, "xx")


def test_a_huge_digit_string_is_an_invalid_pixel_not_a_crash() -> None:
    assert parse_picture(b"9" * 10_000, 1, 1, "gray256").invalid == 1
    assert parse_picture(b"0" * 10_000 + b"7", 1, 1, "color16").pixels == [7]


def test_the_output_floor_fits_the_largest_picture_printed_plainly() -> None:
    big = spec(128, 128, "gray256")
    printed = b"\n".join(b" ".join(b"255" for _ in range(128)) for _ in range(128))
    assert len(printed) <= picture_output_floor(big)


@given(
    st.binary(max_size=400),
    st.integers(1, 8),
    st.integers(1, 8),
    st.sampled_from(["bw", "color16", "gray256"]),
)
def test_hostile_output_never_raises_and_the_encoding_decodes_back(
    data: bytes, w: int, h: int, palette: str
) -> None:
    pic = make_picture(data, spec(w, h, palette))
    assert len(pic.pixels) == w * h * chars_per_pixel(palette)
    assert 0 <= pic.missing_pixels + pic.invalid_pixels <= w * h
    decoded = decode_pixels(pic.pixels, palette, w * h)
    assert sum(v is None for v in decoded) == pic.missing_pixels + pic.invalid_pixels
    assert all(v is None or 0 <= v <= PALETTE_MAX[palette] for v in decoded)
