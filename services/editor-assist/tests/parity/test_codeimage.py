"""codeimage parity: the platform's schema, views, merge and settle, case for case.

Cases derived from heig-quiz `packages/qt-code/src/image/schema.test.ts` (a draft with no target
or a stale one is valid, publication wants a fitting one, sides 3..128, the empty draft),
`image/server.ts` (the target is published, the reference is not), `image/pixels.ts` (the
compact encoding) and `generate.test.ts` (`settleCodeImage`: a 3 × 3 square "111101111"; a
missing pixel is no target; a target the teacher chose is kept).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_contracts.pictures import decode_pixels, encode_pixels
from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.codeimage import (
    CodeImageConfig,
    empty_codeimage_draft,
    publication_issues,
    target_pixels,
)
from quiz_contracts.runner import CaseResult, CompileResult, Picture, RunReply
from quiz_editor_assist.generators import plan_settle, settle_reply
from quiz_editor_assist.generators.codeimage import merge_codeimage_proposal

CODEIMAGE = question_type("codeimage")
SQUARE = {"width": 4, "height": 3, "palette": "bw"}


def image_config(**over: Any) -> dict[str, Any]:
    return {
        "configVersion": 1,
        "prompt": "Draw a 4 × 3 checkerboard.",
        "language": "python",
        "referenceSolution": "print('1 0 1 0 0 1 0 1 1 0 1 0')",
        "image": SQUARE,
        "target": {**SQUARE, "pixels": "101001011010"},
        **over,
    }


def parsed(config: dict[str, Any]) -> CodeImageConfig:
    reading = read_draft("codeimage", config)
    assert isinstance(reading.config, CodeImageConfig), reading.problems
    return reading.config


def test_a_complete_config_with_128_kib_of_output() -> None:
    config = parsed(image_config())
    assert config.limits.model_dump(by_alias=True) == {
        "timeMs": 2000,
        "memoryMb": 128,
        "outputKb": 128,
    }
    assert config.runtime == "backend"
    assert parsed(image_config(limits={"timeMs": 1000})).limits.output_kb == 128


def test_no_target_or_a_stale_one_is_a_valid_draft_publication_wants_a_fitting_one() -> None:
    assert publication_issues(parsed(image_config(target=None))) == ["codeimage.target_missing"]
    stale = {"width": 4, "height": 3, "palette": "gray256", "pixels": "00" * 12}
    assert publication_issues(parsed(image_config(target=stale))) == ["codeimage.target_size"]
    wrong = {**SQUARE, "pixels": "10100101101x"}
    assert publication_issues(parsed(image_config(target=wrong))) == ["codeimage.target_value"]
    assert publication_issues(parsed(image_config())) == []
    assert target_pixels(parsed(image_config(target=stale))) is None
    assert target_pixels(parsed(image_config())) == [1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0]


@pytest.mark.parametrize("side", [2, 129])
def test_sides_are_3_to_128(side: int) -> None:
    assert not read_draft("codeimage", image_config(image={**SQUARE, "width": side})).valid


def test_the_empty_draft_and_the_compact_encoding() -> None:
    draft = empty_codeimage_draft()
    assert (draft["target"], draft["image"], draft["language"]) == (
        None,
        {"width": 16, "height": 16, "palette": "bw"},
        "c",
    )
    assert not read_draft("codeimage", draft).valid  # no prompt
    assert encode_pixels([0, 15, None, 255], "gray256") == "000fxxff"
    assert encode_pixels([0, 15, None, 16], "color16") == "0fxx"
    assert decode_pixels("0fx", "color16", 4) == [0, 15, None, None]


def test_views_publish_the_target_never_the_reference() -> None:
    config = image_config(compileArgs="-O2")
    student = CODEIMAGE.to_student(config)
    assert student["image"] == SQUARE and student["target"] == {**SQUARE, "pixels": "101001011010"}
    assert "referenceSolution" not in student and "-O2" not in str(student)
    assert CODEIMAGE.to_solution(config) == {
        "referenceSolution": "print('1 0 1 0 0 1 0 1 1 0 1 0')",
        "image": SQUARE,
        "target": {**SQUARE, "pixels": "101001011010"},
    }


def test_the_reference_merges_as_for_code() -> None:
    two = {
        **empty_codeimage_draft(),
        "prompt": "P",
        "template": "a\n// @@lock\nb\n// @@endlock\nc\n",
    }
    assert merge_codeimage_proposal(two, {"referenceSolution": "x"})["referenceSolution"] == ""
    assert (
        merge_codeimage_proposal(two, {"referenceSolution": "x\n// @@next\ny"})["referenceSolution"]
        == "x\n// @@next\ny"
    )
    mine = {**two, "referenceSolution": "mine"}
    assert merge_codeimage_proposal(mine, {"referenceSolution": "x\n// @@next\ny"}) == mine


# --- settle (settleCodeImage) -----------------------------------------------------------------

BW_3X3 = {"width": 3, "height": 3, "palette": "bw"}


def to_draw(**over: Any) -> dict[str, Any]:
    return image_config(**{"image": BW_3X3, "target": None, **over})


def picture(pixels: str, missing: int = 0, invalid: int = 0) -> Picture:
    return Picture(**BW_3X3, pixels=pixels, missing_pixels=missing, invalid_pixels=invalid)


def settle(
    config: dict[str, Any], pic: Picture | None, **run: Any
) -> tuple[dict[str, Any], list[Any]]:
    step = plan_settle("codeimage", config)
    assert step.plan is not None
    assert step.plan.request.picture is not None and step.plan.request.picture.palette == "bw"
    result = CaseResult(name="image", exit_code=0, **run)
    done = RunReply(language="python", compile=CompileResult(ok=True), cases=[result], picture=pic)
    return settle_reply("codeimage", config, step.plan, done)


def test_the_picture_the_reference_draws_becomes_the_target() -> None:
    settled, left = settle(to_draw(), picture("111101111"))
    assert left == [] and settled["target"] == {**BW_3X3, "pixels": "111101111"}
    assert publication_issues(parsed(settled)) == []


def test_a_picture_with_a_missing_pixel_or_a_cut_run_is_no_target() -> None:
    settled, left = settle(to_draw(), picture("111xxxxxx", missing=6))
    assert settled["target"] is None and [i.code for i in left] == [ErrorCode.partial]
    settled, left = settle(to_draw(), picture("111101111"), output_truncated=True)
    assert settled["target"] is None and [i.code for i in left] == [ErrorCode.partial]


def test_a_target_the_teacher_chose_is_kept_nothing_runs() -> None:
    chosen = to_draw(target={**BW_3X3, "pixels": "000000000"})
    assert plan_settle("codeimage", chosen).plan is None


# --- through the HTTP route: the real runner draws the target ----------------------------------

DRAFT = {
    **empty_codeimage_draft(),
    "prompt": "Draw a white square with a black centre.",
    "language": "python",
    "image": BW_3X3,
}
REFERENCE = (
    "for y in range(3):\n    print(' '.join('0' if (x, y) == (1, 1) else '1' for x in range(3)))\n"
)


@pytest.mark.integration
async def test_settle_draws_the_target_through_http(wand: Any) -> None:
    r = await wand.generate(
        "codeimage", DRAFT, {"proposal": {"referenceSolution": REFERENCE}, "explanation": ""}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["incomplete"] is None, body
    assert body["config"]["target"] == {**BW_3X3, "pixels": "111101111"}
    assert body["config"]["referenceSolution"] == REFERENCE


@pytest.mark.integration
async def test_a_picture_missing_pixels_comes_back_partial_through_http(wand: Any) -> None:
    r = await wand.generate(
        "codeimage", DRAFT, {"proposal": {"referenceSolution": "print('1 1 1')"}, "explanation": ""}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["target"] is None
    assert [i["code"] for i in body["incomplete"]] == ["partial"]
    assert "6 missing" in body["incomplete"][0]["message"]
