"""code and codeimage: merge, and settle on the runner as pure plan/apply (ADR-059 §1–§2)."""

from __future__ import annotations

from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import CaseResult, CompileResult, Picture, RunReply
from quiz_editor_assist.generators import plan_settle, runner_failed, settle_reply
from quiz_editor_assist.generators.code import merge_code_proposal
from quiz_editor_assist.generators.codeimage import merge_codeimage_proposal

TEMPLATE = "def double(x):\n    @@edit\n\nprint(double(int(input())))"


def case(name: str, stdin: str = "", expected: str = "") -> dict[str, Any]:
    return {"name": name, "stdin": stdin, "args": [], "visible": True, "expected_stdout": expected}


def code(**fields: Any) -> dict[str, Any]:
    return {"prompt": "Doublez.", "language": "python", "template": TEMPLATE} | fields


def reply(*results: CaseResult, ok: bool = True, output: str = "") -> RunReply:
    return RunReply(
        language="python", compile=CompileResult(ok=ok, output=output), cases=list(results)
    )


# --- merge -------------------------------------------------------------------------------------


def test_reference_written_only_when_empty_and_fitting_the_regions() -> None:
    fits = {"reference": "return 2 * x"}
    assert merge_code_proposal(code(), fits)["reference"] == "return 2 * x"
    assert merge_code_proposal(code(reference="return x+x"), fits)["reference"] == "return x+x"
    two_regions = {"reference": "return 2 * x\n@@next\nprint(1)"}
    assert "reference" not in merge_code_proposal(code(), two_regions)
    no_template = {"prompt": "P", "language": "python"}  # one region: the whole program
    assert "reference" not in merge_code_proposal(no_template, two_regions)
    assert merge_code_proposal(no_template, {"reference": "print(1)"})["reference"] == "print(1)"
    assert "reference" not in merge_code_proposal(code(template=["garbage"]), fits)


def test_placeholder_case_goes_and_cases_append_without_repeating_a_name() -> None:
    placeholder = {"id": "t1", "name": "", "stdin": "", "args": [], "visible": True}
    teacher = case("zero", "0", "0\n")
    config = code(cases=[placeholder, teacher])
    proposal = {
        "cases": [
            {"name": "zero", "stdin": "9"},
            {"name": "neg", "stdin": "-2", "visible": False, "expected_stdout": "lie"},
            {"name": "neg", "stdin": "-3"},
            {"name": "  ", "stdin": "1"},
        ]
    }
    merged = merge_code_proposal(config, proposal)
    assert merged["cases"] == [
        teacher,
        {
            "id": "t2",
            "name": "neg",
            "stdin": "-2",
            "args": [],
            "visible": False,
            "expected_stdout": "",  # never the model's: settle computes it
            "expected_exit_code": 0,
        },
    ]


def test_codeimage_writes_the_reference_as_code_does() -> None:
    config = {"prompt": "Carré", "language": "python", "template": "@@edit\n@@edit"}
    assert "reference" not in merge_codeimage_proposal(config, {"reference": "a"})
    assert merge_codeimage_proposal(config, {"reference": "a\n@@next\nb"})["reference"]


# --- settle: code ------------------------------------------------------------------------------


def valid_code() -> dict[str, Any]:
    return code(
        reference="return 2 * x",
        cases=[
            case("written", "1", "2\n"),
            case("two", "2") | {"id": "t1"},
            case("slow", "3"),
            case("cut", "4"),
            case("fails", "5"),
        ],
    )


def test_settle_plan_runs_the_reference_on_cases_whose_output_is_empty() -> None:
    step = plan_settle("code", valid_code())
    assert step.incomplete == []
    assert step.request is not None
    assert [c.name for c in step.request.cases] == ["two", "slow", "cut", "fails"]
    assert step.request.files[0].path == "main.py"
    assert step.request.files[0].content == (
        "def double(x):\n    return 2 * x\n\nprint(double(int(input())))"
    )


def test_settle_apply_writes_outputs_and_a_non_zero_exit_code() -> None:
    config = valid_code()
    settled, incomplete = settle_reply(
        "code",
        config,
        reply(
            CaseResult(name="two", stdout="4\n", exit_code=0),
            CaseResult(name="slow", stdout="6", exit_code=None, timed_out="wall", signal="SIGKILL"),
            CaseResult(name="cut", stdout="8" * 10, exit_code=0, output_truncated=True),
            CaseResult(name="fails", stdout="boom\n", exit_code=3),
        ),
    )
    cases = {c["name"]: c for c in settled["cases"]}
    assert cases["written"] == config["cases"][0]
    assert cases["two"]["expected_stdout"] == "4\n"
    assert "expected_exit_code" not in cases["two"]
    assert cases["fails"]["expected_stdout"] == "boom\n"
    assert cases["fails"]["expected_exit_code"] == 3
    assert cases["slow"]["expected_stdout"] == ""  # timed out: stays empty
    assert cases["cut"]["expected_stdout"] == ""  # cut: stays empty
    assert [i.code for i in incomplete] == [ErrorCode.partial]
    assert "slow" in incomplete[0].message and "cut" in incomplete[0].message


def test_settle_keeps_a_teachers_exit_code() -> None:
    config = code(reference="return 1", cases=[case("a") | {"expected_exit_code": 2}])
    settled, _ = settle_reply("code", config, reply(CaseResult(name="a", stdout="x", exit_code=5)))
    assert settled["cases"][0]["expected_exit_code"] == 2


def test_settle_with_a_reference_that_does_not_compile() -> None:
    config = valid_code()
    settled, incomplete = settle_reply("code", config, reply(ok=False, output="SyntaxError"))
    assert settled == config
    assert incomplete[0].code == ErrorCode.compile_failed
    assert "SyntaxError" in incomplete[0].message


def test_settle_runs_only_a_valid_merged_draft() -> None:
    step = plan_settle("code", code(cases=[case("a")]))  # no reference
    assert step.request is None
    assert [i.code for i in step.incomplete] == [ErrorCode.draft_invalid]


def test_nothing_to_settle_when_every_output_is_written() -> None:
    step = plan_settle("code", code(reference="return 1", cases=[case("a", "1", "1\n")]))
    assert step.request is None and step.incomplete == []


def test_no_runner_or_a_busy_one_leaves_the_draft_incomplete() -> None:
    assert runner_failed(None).code == ErrorCode.runner_unavailable
    busy = ContractError(ErrorCode.runner_busy, "all slots taken", retry_after_s=2)
    assert runner_failed(busy).code == ErrorCode.runner_busy


# --- settle: codeimage -------------------------------------------------------------------------

SHA = "a" * 64


def image(**fields: Any) -> dict[str, Any]:
    base = {"prompt": "Carré", "language": "python", "reference": "print('P3')", "width": 2}
    return base | {"height": 2} | fields


def picture(missing: int = 0, invalid: int = 0) -> Picture:
    return Picture(
        width=2, height=2, data="iVBO", sha256=SHA, missing_pixels=missing, invalid_pixels=invalid
    )


def test_codeimage_plan_asks_for_the_picture_only_without_a_target() -> None:
    step = plan_settle("codeimage", image())
    assert step.request is not None and step.request.picture is not None
    assert (step.request.picture.width, step.request.picture.height) == (2, 2)
    target = {"width": 2, "height": 2, "data": "x", "sha256": SHA}
    assert plan_settle("codeimage", image(target=target)).request is None


def test_codeimage_the_drawn_picture_becomes_the_target() -> None:
    run = RunReply(
        language="python",
        compile=CompileResult(ok=True),
        cases=[CaseResult(name="picture", exit_code=0)],
        picture=picture(),
    )
    settled, incomplete = settle_reply("codeimage", image(), run)
    assert incomplete == []
    assert settled["target"] == {
        "format": "png",
        "width": 2,
        "height": 2,
        "data": "iVBO",
        "sha256": SHA,
    }


def test_codeimage_a_missing_or_invalid_pixel_makes_no_target() -> None:
    for pic in (picture(missing=1), picture(invalid=4)):
        run = RunReply(language="python", compile=CompileResult(ok=True), picture=pic)
        settled, incomplete = settle_reply("codeimage", image(), run)
        assert "target" not in settled
        assert incomplete[0].code == ErrorCode.partial


def test_codeimage_a_timed_out_run_makes_no_target() -> None:
    run = RunReply(
        language="python",
        compile=CompileResult(ok=True),
        cases=[CaseResult(name="picture", timed_out="cpu")],
        picture=picture(),
    )
    settled, incomplete = settle_reply("codeimage", image(), run)
    assert "target" not in settled and incomplete[0].code == ErrorCode.partial


def test_codeimage_compile_failed() -> None:
    run = RunReply(language="python", compile=CompileResult(ok=False, output="error"))
    _, incomplete = settle_reply("codeimage", image(), run)
    assert incomplete[0].code == ErrorCode.compile_failed
