"""code parity: the platform's schema, template rules, views, merge and settle, case for case.

Cases derived from heig-quiz `packages/qt-code/src/schema.test.ts` (defaults, args, the two
checks, refusals, `emptyCodeCase`, the empty draft), `reference.test.ts` (the @@lock regions and
the @@next cut in its comment forms), `server.ts` (toStudent/toSolution), `generate.test.ts`
(`mergeReference`, `mergeCode`, `settleCode`), and issue 8's list.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.code import CODE_CONFIG_VERSION, empty_code_case, empty_code_draft
from quiz_contracts.questions.program import reference_regions, split_template
from quiz_contracts.runner import CaseResult, CompileResult, RunReply
from quiz_editor_assist.generators import plan_settle, settle_reply
from quiz_editor_assist.generators.code import merge_code_proposal

CODE = question_type("code")


def config(**over: Any) -> dict[str, Any]:
    return {
        "configVersion": CODE_CONFIG_VERSION,
        "prompt": "Sum the integers read on stdin.",
        "language": "c",
        "tests": {
            "mode": "io",
            "cases": [
                {
                    "name": "three items",
                    "stdin": "1 2 3",
                    "expected": "6\n",
                    "visible": True,
                    "points": 2,
                },
                {"name": "empty", "stdin": "", "expected": "0\n", "visible": True},
                {"name": "negative", "stdin": "-1 -2", "expected": "-3\n"},
            ],
        },
        **over,
    }


def one_case(**case: Any) -> dict[str, Any]:
    return config(
        language="python", tests={"mode": "io", "cases": [{"name": "c", "expected": "", **case}]}
    )


def test_every_default_fills() -> None:
    parsed = read_draft("code", {**one_case(expected="1"), "language": "python"}).config
    assert parsed is not None
    wire = parsed.model_dump(by_alias=True)
    assert (wire["template"], wire["files"], wire["action"], wire["runsPerMinute"]) == (
        "",
        [],
        "run",
        10,
    )
    assert wire["limits"] == {"timeMs": 2000, "memoryMb": 128, "outputKb": 64}
    assert (wire["allOrNothing"], wire["referenceSolution"], wire["runtime"]) == (
        False,
        "",
        "backend",
    )
    assert wire["tests"]["compare"] == {"trimTrailing": True, "ignoreCase": False, "numeric": None}
    case = wire["tests"]["cases"][0]
    assert (case["stdin"], case["visible"], case["points"], case["timeMs"]) == ("", False, 1, None)
    assert (case["args"], case["compareStdout"], case["expectedExitCode"]) == ([], True, 0)


def test_a_command_line_is_one_argv_entry_per_element() -> None:
    parsed = read_draft("code", one_case(args=["3", "a b", "x;y"])).config
    assert parsed is not None and parsed.model_dump(by_alias=True)["tests"]["cases"][0]["args"] == [
        "3",
        "a b",
        "x;y",
    ]


def test_the_two_checks_independently_and_a_case_that_checks_nothing() -> None:
    assert read_draft("code", one_case(compareStdout=False, expectedExitCode=3)).valid
    assert read_draft("code", one_case(expectedExitCode=None)).valid
    nothing = read_draft("code", one_case(compareStdout=False, expectedExitCode=None))
    assert [(p.path, p.message) for p in nothing.problems] == [
        ("tests.cases.0.compareStdout", "code.case_checks_nothing")
    ]
    assert not read_draft("code", one_case(expectedExitCode=256)).valid
    assert not read_draft("code", one_case(expectedExitCode=-1)).valid


REFUSED = {
    "no version": config(configVersion=2),
    "empty prompt": config(prompt=""),
    "unknown language": config(language="cobol"),
    "no case at all": config(tests={"mode": "io", "cases": []}),
    "tap mode (phase 3)": config(tests={"mode": "tap", "cases": config()["tests"]["cases"]}),
    "negative points": one_case(points=-1),
    "a time limit below the floor": config(limits={"timeMs": 10}),
    "a memory limit above the ceiling": config(limits={"memoryMb": 4096}),
    "a file name with a slash": config(files=[{"name": "../etc/passwd", "content": ""}]),
    "an unnamed case": one_case(name=""),
    "31 cases": config(
        tests={"mode": "io", "cases": [{"name": f"c{i}", "expected": ""} for i in range(31)]}
    ),
    "a runtime the platform does not have": config(runtime="browser"),
}


@pytest.mark.parametrize("bad", REFUSED.values(), ids=REFUSED.keys())
def test_refuses_what_a_runner_could_not_honour(bad: dict[str, Any]) -> None:
    assert not read_draft("code", bad).valid


def test_empty_case_and_draft() -> None:
    assert empty_code_case() == {
        "name": "", "args": [], "stdin": "", "expected": "", "compareStdout": True,
        "expectedExitCode": 0, "visible": False, "points": 1, "timeMs": None,
    }  # fmt: skip
    draft = empty_code_draft()
    assert (draft["prompt"], draft["template"], draft["language"], draft["runtime"]) == (
        "",
        "",
        "c",
        "runno",
    )
    assert draft["tests"]["cases"] == [empty_code_case(visible=True)]
    assert not read_draft("code", draft).valid


# --- the template's regions and the @@next cut (reference.test.ts) --------------------------

ONE_REGION = "int main(void) {\n    return 0;\n}\n"
TWO_REGIONS_C = (
    "int sum(const int *t, int n)\n{\n// @@lock\n    /* your code */\n}\n\n"
    "int main(void) {\n// @@endlock\n    return 0;\n}\n"
)
TWO_REGIONS_PY = (
    "def total(xs):\n# @@lock\n    pass\n\ndef main():\n# @@endlock\n    print(total([]))\n"
)

RETURN_42 = "int main(void) {\n    return 42;\n}\n"
PY_PIECES = "def total(xs):\n    return sum(xs)\n# @@next\n    print(total([1]))\n"
REGIONS: dict[str, tuple[str, str, str, list[str] | None]] = {
    "the whole reference is the single region of a one-region template": (
        "c", ONE_REGION, RETURN_42, [RETURN_42]
    ),
    "a reference never written reads as the template's own text": (
        "c", ONE_REGION, "", [ONE_REGION]
    ),
    "two regions cut on a C @@next line, the line dropped": (
        "c", TWO_REGIONS_C, "int sum(const int *t, int n)\n/* @@next */\n    return 1;",
        ["int sum(const int *t, int n)\n", "    return 1;\n"],
    ),
    "two regions cut on a Python @@next line": (
        "python", TWO_REGIONS_PY, PY_PIECES,
        ["def total(xs):\n    return sum(xs)\n", "    print(total([1]))\n\n"],
    ),
    "the // @@next spelling too, indented": (
        "c", TWO_REGIONS_C, "a\n  // @@next\nb\n", ["a\n", "b\n\n"]
    ),
    "the bare @@next": ("c", TWO_REGIONS_C, "a\n@@next\nb", ["a\n", "b\n"]),
    "two regions and one piece: no fit": (
        "c", TWO_REGIONS_C, "int sum(void) { return 1; }", None
    ),
    "more pieces than regions: no fit": ("c", ONE_REGION, "return 0;\n// @@next\nextra", None),
    "an empty piece stays empty": ("c", TWO_REGIONS_C, "// @@next\nb", ["\n", "b\n"]),
    "a fully locked template fits only an empty reference": (
        "c", "// @@lock\nint x;\n", "int y;", None
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("language", "template", "reference", "regions"), REGIONS.values(), ids=REGIONS.keys()
)
def test_reference_regions(
    language: str, template: str, reference: str, regions: list[str] | None
) -> None:
    assert reference_regions(template, language, reference) == regions


def test_split_template_marks_unlock_and_keeps_every_byte() -> None:
    template = "a\n/* @@lock */\nb\n# @@unlock\nc\n"
    c_segments = split_template(template, "c")
    assert "".join(s.text for s in c_segments) == template
    assert [(s.kind, s.index) for s in c_segments] == [
        ("editable", 0),
        ("locked", None),
    ]  # '#' is not C
    py = split_template("a\n# @@lock\nb\n# @@unlock\nc\n", "python")
    assert [(s.kind, s.index, s.text) for s in py] == [
        ("editable", 0, "a\n"),
        ("locked", None, "# @@lock\nb\n# @@unlock\n"),
        ("editable", 1, "c\n"),
    ]


def test_views() -> None:
    cfg = config(
        template=ONE_REGION,
        referenceSolution="int main(void) { return 6; }\n",
        compileArgs="-lm",
        files=[{"name": "data.csv", "content": "1,2,3"}],
        tests={
            "mode": "io",
            "compare": {
                "trimTrailing": True,
                "ignoreCase": True,
                "numeric": {"epsilon": 0.01, "mode": "abs"},
            },
            "cases": [
                {"name": "shown", "stdin": "1", "expected": "1\n", "visible": True, "args": ["-v"]},
                {
                    "name": "exit only",
                    "expected": "ignored",
                    "compareStdout": False,
                    "expectedExitCode": 3,
                    "visible": True,
                },
                {"name": "hidden", "stdin": "secret", "expected": "S\n", "points": 2},
            ],
        },
    )
    student = CODE.to_student(cfg)
    assert student["segments"] == [{"kind": "editable", "index": 0, "text": ONE_REGION}]
    assert student["filesPreview"] == [{"name": "data.csv", "bytes": 5}]
    assert student["visibleCases"][1]["expected"] == ""  # does not compare stdout: nothing to show
    assert (student["hiddenCount"], student["hiddenPoints"]) == (1, 2)
    assert student["compare"]["numeric"] == {"epsilon": 0.01, "mode": "abs"}
    assert (
        "secret" not in str(student) and "-lm" not in str(student) and "1,2,3" not in str(student)
    )
    solution = CODE.to_solution(cfg)
    assert solution["referenceSolution"] == "int main(void) { return 6; }\n"
    assert [c["visible"] for c in solution["cases"]] == [True, True, False]


# --- the merge (mergeReference, mergeCode) ----------------------------------------------------


def draft(**over: Any) -> dict[str, Any]:
    return {**empty_code_draft(), "prompt": "Sum", **over}


LOCKED = "// @@lock\nint x;\n// @@endlock\nint f(){}\n"


def test_the_reference_is_written_only_when_blank_and_fitting() -> None:
    def ref(d: dict[str, Any], p: str) -> Any:
        return merge_code_proposal(d, {"referenceSolution": p, "cases": []})["referenceSolution"]

    assert ref(draft(), "int main(){}") == "int main(){}"
    assert ref(draft(referenceSolution="mine"), "theirs") == "mine"
    assert ref(draft(template=LOCKED), "a\n// @@next\nb") == ""
    assert ref(draft(template=LOCKED), "int f(){ return 1; }") == "int f(){ return 1; }"
    assert ref(draft(), "  int main(){}\n\n") == "  int main(){}\n\n"  # as proposed, not trimmed


def test_the_placeholder_goes_when_cases_are_added_names_are_case_insensitive() -> None:
    merged = merge_code_proposal(
        draft(),
        {
            "referenceSolution": "ref",
            "cases": [
                {"name": "small", "stdin": "1 2", "args": [], "visible": True},
                {"name": "negative", "stdin": "-1 1", "args": ["-v"], "visible": False},
                {"name": "SMALL", "stdin": "dup", "args": [], "visible": True},
            ],
        },
    )
    assert merged["referenceSolution"] == "ref"
    assert merged["tests"]["cases"] == [
        empty_code_case(name="small", stdin="1 2", visible=True),
        empty_code_case(name="negative", stdin="-1 1", args=["-v"], visible=False),
    ]


def test_the_teachers_cases_stay_and_no_name_repeats() -> None:
    mine = empty_code_case(name="mine", stdin="5", expected="5\n")
    before = draft(tests={**draft()["tests"], "cases": [mine]})
    merged = merge_code_proposal(
        before,
        {
            "referenceSolution": "",
            "cases": [{"name": "Mine", "stdin": "6", "args": [], "visible": False}],
        },
    )
    assert merged == before


def test_names_stdin_args_are_cut_and_the_placeholder_stays_when_nothing_is_added() -> None:
    merged = merge_code_proposal(
        draft(),
        {
            "referenceSolution": "",
            "cases": [
                {
                    "name": "  " + "n" * 70 + " ",
                    "stdin": "s" * 16_100,
                    "args": ["a" * 250] * 40,
                    "visible": True,
                }
            ],
        },
    )
    (case,) = merged["tests"]["cases"]
    assert case["name"] == "n" * 60 and len(case["stdin"]) == 16_000
    assert len(case["args"]) == 32 and {len(a) for a in case["args"]} == {200}
    before = draft()
    assert (
        merge_code_proposal(
            before,
            {
                "referenceSolution": "",
                "cases": [{"name": " ", "stdin": "", "args": [], "visible": True}],
            },
        )
        == before
    )


# --- settle (settleCode), as plan/apply around the runner -------------------------------------


def settled_draft() -> dict[str, Any]:
    return draft(
        language="python",
        referenceSolution="print(1)",
        tests={
            "mode": "io",
            "cases": [
                empty_code_case(name="known", stdin="0", expected="0\n"),
                empty_code_case(name="a", stdin="1 2"),
                empty_code_case(name="b", stdin="x"),
                empty_code_case(name="slow", stdin="9"),
                empty_code_case(name="exit only", compareStdout=False, expectedExitCode=2),
            ],
        },
    )


def run(stdout: str, **extra: Any) -> CaseResult:
    return CaseResult(name="-", stdout=stdout, exit_code=extra.pop("exit_code", 0), **extra)


def reply(*cases: CaseResult, ok: bool = True) -> RunReply:
    return RunReply(
        language="python", compile=CompileResult(ok=ok, output="" if ok else "e"), cases=list(cases)
    )


def test_settle_runs_the_cases_without_an_output_and_writes_what_it_printed() -> None:
    config = settled_draft()
    step = plan_settle("code", config)
    assert step.plan is not None and step.incomplete == []
    assert [c.name for c in step.plan.request.cases] == ["a", "b", "slow"]
    settled, left = settle_reply(
        "code",
        config,
        step.plan,
        reply(run("3\n"), run("", exit_code=2), run("", timed_out="wall", exit_code=None)),
    )
    assert [
        (c["name"], c["expected"], c["expectedExitCode"]) for c in settled["tests"]["cases"]
    ] == [
        ("known", "0\n", 0),
        ("a", "3\n", 0),
        ("b", "", 2),
        ("slow", "", 0),
        ("exit only", "", 2),
    ]
    assert [i.code for i in left] == [ErrorCode.partial] and "slow" in left[0].message


def test_a_run_ended_by_a_signal_writes_its_output_and_a_nonzero_code_overwrites() -> None:
    config = settled_draft()
    config["tests"]["cases"][1]["expectedExitCode"] = 7
    step = plan_settle("code", config)
    assert step.plan is not None
    settled, left = settle_reply(
        "code",
        config,
        step.plan,
        reply(
            run("partial\n", exit_code=None, signal="SIGSEGV"),
            run("x\n", exit_code=5),
            run("", memory_exceeded=True),
        ),
    )
    cases = settled["tests"]["cases"]
    assert (cases[1]["expected"], cases[1]["expectedExitCode"]) == ("partial\n", 7)
    assert (cases[2]["expected"], cases[2]["expectedExitCode"]) == ("x\n", 5)
    assert cases[3]["expected"] == "" and [i.code for i in left] == [ErrorCode.partial]


def test_compile_failure_leaves_the_draft_and_nothing_runs_without_a_reference() -> None:
    config = settled_draft()
    step = plan_settle("code", config)
    assert step.plan is not None
    settled, left = settle_reply("code", config, step.plan, reply(ok=False))
    assert settled == config and [i.code for i in left] == [ErrorCode.compile_failed]
    idle = plan_settle("code", {**config, "referenceSolution": ""})
    assert idle.plan is None and idle.incomplete == [] and idle.notices
    assert plan_settle("code", draft()).incomplete[0].code == ErrorCode.draft_invalid


# --- through the HTTP route: the real runner settles the outputs -------------------------------

PY_DRAFT = {
    **empty_code_draft(),
    "prompt": "Read two integers and print their sum.",
    "language": "python",
}
PY_REFERENCE = (
    "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
    "sys.exit(3 if a + b < 0 else 0)\n"
)


@pytest.mark.integration
async def test_merge_and_settle_through_http(wand: Any) -> None:
    proposal = {
        "referenceSolution": PY_REFERENCE,
        "cases": [
            {"name": "small", "stdin": "1 2\n", "args": [], "visible": True},
            {"name": "negative", "stdin": "-5 1\n", "args": [], "visible": False},
            {"name": "SMALL", "stdin": "9 9\n", "args": [], "visible": True},
        ],
    }
    r = await wand.generate("code", PY_DRAFT, {"proposal": proposal, "explanation": "Add."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["incomplete"] is None, body
    cases = body["config"]["tests"]["cases"]
    assert [(c["name"], c["expected"], c["expectedExitCode"], c["visible"]) for c in cases] == [
        ("small", "3\n", 0, True),
        ("negative", "-4\n", 3, False),
    ]
    assert body["config"]["referenceSolution"] == PY_REFERENCE
    assert read_draft("code", body["config"]).valid


@pytest.mark.integration
async def test_a_reference_that_does_not_fit_is_not_written_through_http(wand: Any) -> None:
    locked = {**PY_DRAFT, "template": TWO_REGIONS_PY}
    proposal = {
        "referenceSolution": "print(1)",
        "cases": [{"name": "a", "stdin": "", "args": [], "visible": True}],
    }
    r = await wand.generate("code", locked, {"proposal": proposal, "explanation": ""})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["referenceSolution"] == ""
    assert r.json()["incomplete"] is None
    assert any("reference" in n for n in r.json()["notices"])
