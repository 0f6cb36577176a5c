"""Request checks (maxima, paths, sizes), command building and the init's status line."""

from __future__ import annotations

import base64
import os

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import (
    DEFAULT_OUTPUT_BYTES,
    MAX_ARGS,
    MAX_CASES,
    MAX_FILE_BYTES_IN,
    MAX_FILES,
    MAX_OUTPUT_TOTAL_BYTES,
    MAX_REQUEST_BYTES,
    MAX_STDIN_BYTES,
    MEMORY_FLOOR_MB,
    RUN_LIMIT_MAXIMA,
    CaseResult,
    PictureSpec,
    RunCase,
    RunFile,
    RunLanguage,
    RunLimits,
    RunRequest,
    max_output_bytes,
    text_and_b64,
)
from quiz_runner.languages import Toolchain, build_plan, check_file_path
from quiz_runner.sandbox.base import (
    ExecLimits,
    Execution,
    apply_status,
    judge_memory,
    kill_uid,
    parse_archive,
)
from quiz_runner.sandbox.bwrap_session import as_uid
from quiz_runner.service import applied_limits, case_limits, validate_request


def req(**kw: object) -> RunRequest:
    body: dict[str, object] = {
        "language": "python",
        "files": [RunFile(path="main.py", content="print(1)")],
        "cases": [RunCase(name="a")],
    }
    body.update(kw)
    return RunRequest.model_validate(body)


def refused(r: RunRequest) -> ContractError:
    with pytest.raises(ContractError) as err:
        validate_request(r)
    return err.value


def test_defaults_are_within_the_maxima() -> None:
    assert RunLimits().over_maxima() == []
    assert RUN_LIMIT_MAXIMA.over_maxima() == []


@pytest.mark.parametrize("field", list(RunLimits.model_fields))
def test_each_limit_over_its_maximum_is_refused(field: str) -> None:
    over = RunLimits(**{field: getattr(RUN_LIMIT_MAXIMA, field) * 2})
    err = refused(req(limits=over))
    assert err.code is ErrorCode.limit_exceeded and field in err.message


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RunLimits(cpu_s=0)


def test_sizes_over_the_maxima_are_refused() -> None:
    assert refused(req(cases=[RunCase(name=str(i)) for i in range(MAX_CASES + 1)])).code is (
        ErrorCode.limit_exceeded
    )
    files = [RunFile(path=f"f{i}.txt") for i in range(MAX_FILES + 1)]
    assert refused(req(files=files)).code is ErrorCode.limit_exceeded
    big = RunFile(path="main.py", content="#" * (MAX_FILE_BYTES_IN + 1))
    assert refused(req(files=[big])).code is ErrorCode.limit_exceeded
    stdin = RunCase(name="a", stdin="x" * (MAX_STDIN_BYTES + 1))
    assert refused(req(cases=[stdin])).code is ErrorCode.limit_exceeded
    args = RunCase(name="a", args=["x"] * (MAX_ARGS + 1))
    assert refused(req(cases=[args])).code is ErrorCode.limit_exceeded


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../x", "a/../../x", "a//b", "", ".", "a/./b", "x y", "a\\b", "é.py"]
)
def test_file_paths_that_could_leave_the_work_dir_are_refused(path: str) -> None:
    with pytest.raises(ContractError) as err:
        check_file_path(path)
    assert err.value.code is ErrorCode.invalid_request


def test_good_paths_and_base64_files() -> None:
    assert check_file_path("data/input-1.txt") == "data/input-1.txt"
    blob = RunFile(path="b.bin", content=base64.b64encode(b"\xff\x00").decode(), encoding="base64")
    _, entry, files = validate_request(req(files=[RunFile(path="main.py"), blob]))
    assert entry == "main.py" and files["b.bin"] == b"\xff\x00"


def test_entry_and_duplicates_and_file_under_file() -> None:
    assert refused(req(entry="other.py")).code is ErrorCode.invalid_request
    dup = [RunFile(path="main.py"), RunFile(path="main.py")]
    assert refused(req(files=dup)).code is ErrorCode.invalid_request
    nested = [RunFile(path="main.py"), RunFile(path="main.py/x")]
    assert refused(req(files=nested)).code is ErrorCode.invalid_request
    pic = PictureSpec(width=2, height=2, palette="bw", source="file", path="../../etc/shadow")
    assert refused(req(picture=pic)).code is ErrorCode.invalid_request


def test_unknown_language() -> None:
    err = refused(req(language="cobol"))
    assert err.code is ErrorCode.unsupported_language and "python" in err.message


def test_commands_are_argument_lists_per_language() -> None:
    tools = Toolchain()
    sources = ["main.c", "util.c", "util.h", "data.txt"]
    c = build_plan(RunLanguage.c, "main.c", sources, 64, tools)
    assert c.compile is not None and c.compile[0] == tools.gcc
    assert "/src/main.c" in c.compile and "/src/util.c" in c.compile
    assert "/src/util.h" not in c.compile and c.run == ["/build/main"]
    py = build_plan(RunLanguage.python, "main.py", ["main.py"], 64, tools)
    assert py.run == [tools.python, "-B", "-E", "-s", "main.py"]
    js = build_plan(RunLanguage.javascript, "main.js", ["main.js"], 256, tools)
    # V8's whole heap is memory_mb: 3 semi-spaces of 16 MiB plus 208 MiB of old space.
    assert js.run[1:3] == ["--max-semi-space-size=16", "--max-old-space-size=208"]
    assert js.extra_address_mb >= 1024
    java = build_plan(RunLanguage.java, "Main.java", ["Main.java"], 100, tools)
    assert java.run[-1] == "Main" and "-Xmx100m" in java.run
    with pytest.raises(ContractError):
        build_plan(RunLanguage.java, "main.py", ["main.py"], 100, tools)


def test_case_limits_add_the_runtime_reservations() -> None:
    js = build_plan(RunLanguage.javascript, "main.js", ["main.js"], 128, Toolchain())
    lim = case_limits(RunLimits(memory_mb=128, processes=4, cpu_s=1.2), js)
    assert lim.address_mb == 128 + js.extra_address_mb
    assert lim.processes == 4 + js.extra_processes
    assert lim.cpu_ms == 1200 and lim.memory_mb == 128  # to the millisecond, not rounded up
    assert not lim.judge_rss  # V8's heap limit says so itself when it stops the program


LIM = ExecLimits(
    cpu_ms=1000,
    wall_s=2,
    address_mb=100,
    processes=4,
    output_bytes=10,
    file_bytes=10,
    memory_mb=64,
    tmpfs_bytes=1 << 20,
    tmpfs_inodes=64,
)


def test_status_lines_of_the_init() -> None:
    ex = Execution()
    apply_status(ex, b"exit 3 cpu_us 12000 maxrss_kb 900\n", LIM)
    assert (ex.exit_code, ex.signal, ex.cpu_ms, ex.timed_out) == (3, None, 12, None)
    xcpu = Execution()
    apply_status(xcpu, b"signal 24 cpu_us 1000000 maxrss_kb 1\n", LIM)
    assert (xcpu.exit_code, xcpu.signal, xcpu.timed_out) == (None, "SIGXCPU", "cpu")
    hard = Execution()
    apply_status(hard, b"signal 9 cpu_us 1990000 maxrss_kb 1\n", LIM)
    assert hard.timed_out == "cpu"
    killed = Execution()
    apply_status(killed, b"signal 9 cpu_us 1000 maxrss_kb 1\n", LIM)
    assert killed.timed_out is None and killed.signal == "SIGKILL"
    forged = Execution()
    apply_status(forged, b"exit 0; rm -rf /", LIM)
    assert forged.exit_code is None and forged.init_error


def test_fractional_cpu_limits_are_judged_to_the_millisecond() -> None:
    half = ExecLimits(**{**LIM.__dict__, "cpu_ms": 500})
    killed = Execution()
    apply_status(killed, b"signal 9 cpu_us 501000 maxrss_kb 1 killed cpu\n", half)
    assert (killed.signal, killed.timed_out) == ("SIGKILL", "cpu")
    over = Execution()  # ended by itself, but after more CPU than it was given
    apply_status(over, b"exit 0 cpu_us 902000 maxrss_kb 1\n", half)
    assert (over.exit_code, over.timed_out) == (0, "cpu")
    under = Execution()
    apply_status(under, b"exit 0 cpu_us 499000 maxrss_kb 1\n", half)
    assert under.timed_out is None


def test_memory_verdicts() -> None:
    """memory_exceeded only when the limit stopped the program: never after a success."""
    native = Execution(exit_code=1, maxrss_kb=64 * 1024)  # malloc failed at the limit
    judge_memory(native, LIM)
    assert native.memory_exceeded
    succeeded = Execution(exit_code=0, maxrss_kb=64 * 1024)  # near the limit, but it finished
    judge_memory(succeeded, LIM)
    assert not succeeded.memory_exceeded
    py = Execution(exit_code=1, stderr=b"Traceback...\nMemoryError\n")
    judge_memory(py, LIM)
    assert py.memory_exceeded
    fine = Execution(exit_code=0, stderr=b"MemoryError")  # printed, but the program succeeded
    judge_memory(fine, LIM)
    assert not fine.memory_exceeded
    # A JVM's footprint is not the program's: its RSS says nothing, its OutOfMemoryError does.
    jvm = ExecLimits(**{**LIM.__dict__, "judge_rss": False})
    failed = Execution(exit_code=1, maxrss_kb=64 * 1024, stderr=b"IllegalStateException")
    judge_memory(failed, jvm)
    assert not failed.memory_exceeded
    oom = Execution(exit_code=1, stderr=b"java.lang.OutOfMemoryError: Java heap space")
    judge_memory(oom, jvm)
    assert oom.memory_exceeded


def test_wire_text_is_lossless() -> None:
    assert text_and_b64("é".encode()) == ("é", None)
    text, b64 = text_and_b64(b"a\xffb")
    assert text == "a\\xffb" and b64 is not None
    case = CaseResult(name="x", stdout=text, stdout_b64=b64)
    assert case.stdout_bytes() == b"a\xffb"
    # A literal backslash-x in valid UTF-8 is not confused with an escape.
    assert CaseResult(name="y", stdout="a\\xffb").stdout_bytes() == b"a\\xffb"


def test_memory_under_the_language_floor_is_refused() -> None:
    for language, floor in MEMORY_FLOOR_MB.items():
        ok = req(language=language, limits=RunLimits(memory_mb=floor))
        if language == "java":
            ok = ok.model_copy(update={"files": [RunFile(path="Main.java")]})
        validate_request(ok)
        err = refused(ok.model_copy(update={"limits": RunLimits(memory_mb=floor - 1)}))
        assert err.code is ErrorCode.limit_exceeded and f"{floor} MiB" in err.message


def test_files_past_what_one_message_holds_are_refused() -> None:
    """12 files of 256 KiB of text (each within MAX_FILE_BYTES_IN) take just over 3 MiB on the
    wire; 3 of control characters take 4.5 (6 bytes of JSON each): over MAX_FILES_WIRE_BYTES."""
    plain = [RunFile(path=f"f{i}.txt", content="x" * MAX_FILE_BYTES_IN) for i in range(12)]
    validate_request(req(files=plain[:11]))
    err = refused(req(files=plain))
    assert err.code is ErrorCode.limit_exceeded and "MAX_FILES_WIRE_BYTES" in err.message
    control = [RunFile(path=f"f{i}.txt", content="\x01" * MAX_FILE_BYTES_IN) for i in range(3)]
    validate_request(req(files=control[:1]))
    assert "MAX_FILES_WIRE_BYTES" in refused(req(files=control)).message


def test_cases_past_what_one_message_holds_are_refused() -> None:
    """18 cases of 256 KiB of stdin (each within MAX_STDIN_BYTES): over MAX_CASES_WIRE_BYTES."""
    stdin = "x" * MAX_STDIN_BYTES
    cases = [RunCase(name=str(i), stdin=stdin) for i in range(17)]
    small = RunLimits(output_bytes=1024)
    validate_request(req(cases=cases, limits=small))
    err = refused(req(cases=[*cases, RunCase(name="one more", stdin=stdin)], limits=small))
    assert err.code is ErrorCode.limit_exceeded and "MAX_CASES_WIRE_BYTES" in err.message


def test_a_request_past_one_message_is_refused() -> None:
    """What the totals leave out (a picture's path, unchecked on stdout) still counts."""
    picture = PictureSpec(width=1, height=1, palette="bw", path="p" * MAX_REQUEST_BYTES)
    err = refused(req(picture=picture))
    assert err.code is ErrorCode.limit_exceeded and str(MAX_REQUEST_BYTES) in err.message


def test_output_past_what_one_reply_carries_is_refused() -> None:
    """2 × output_bytes × cases ≤ MAX_OUTPUT_TOTAL_BYTES: the message names the most allowed."""
    one = req(limits=RunLimits(output_bytes=RUN_LIMIT_MAXIMA.output_bytes))
    validate_request(one)
    two = one.model_copy(update={"cases": [RunCase(name="a"), RunCase(name="b")]})
    err = refused(two)
    assert err.code is ErrorCode.limit_exceeded and "MAX_OUTPUT_TOTAL_BYTES" in err.message
    assert f"output_bytes at most {max_output_bytes(2)} for 2 cases" in err.message
    many = [RunCase(name=str(i)) for i in range(MAX_CASES)]
    validate_request(req(cases=many, limits=RunLimits(output_bytes=max_output_bytes(MAX_CASES))))
    over = RunLimits(output_bytes=max_output_bytes(MAX_CASES) + 1)
    assert refused(req(cases=many, limits=over)).code is ErrorCode.limit_exceeded
    # 64 KiB asked fits 8 cases, not 9; a picture with no case counts as one.
    asked = RunLimits(output_bytes=DEFAULT_OUTPUT_BYTES)
    validate_request(req(cases=[RunCase(name=str(i)) for i in range(8)], limits=asked))
    nine = req(cases=[RunCase(name=str(i)) for i in range(9)], limits=asked)
    assert refused(nine).code is ErrorCode.limit_exceeded
    picture = PictureSpec(width=8, height=8, palette="bw")
    validate_request(req(cases=[], picture=picture, limits=one.limits))
    assert max_output_bytes(0) == max_output_bytes(1) == RUN_LIMIT_MAXIMA.output_bytes
    assert max_output_bytes(30) == 17_476


@pytest.mark.parametrize("cases", [0, 1, 8, 9, 10, 30, MAX_CASES])
def test_a_request_naming_no_limits_runs_at_every_allowed_case_count(cases: int) -> None:
    """Issue 34 item 7: without `output_bytes` the runner applies the most that fits for that
    many cases (64 KiB up to 8), so no allowed case count is refused; before, 64 KiB × 2 ×
    cases was over the 1 MiB one reply carries from 9 cases on (10 and 100 refused)."""
    plain = req(cases=[RunCase(name=str(i)) for i in range(cases)], limits=RunLimits())
    applied = applied_limits(plain)
    validate_request(applied)
    output_bytes = applied.limits.output_bytes
    assert output_bytes == min(DEFAULT_OUTPUT_BYTES, max_output_bytes(cases))
    assert 2 * output_bytes * max(1, cases) <= MAX_OUTPUT_TOTAL_BYTES
    # The other limits are the request's (the contract's defaults) untouched.
    assert applied.limits.model_dump(exclude={"output_bytes"}) == RunLimits().model_dump(
        exclude={"output_bytes"}
    )
    # Named, it is the request's, never lowered in silence: refused when it does not fit.
    asked = plain.model_copy(update={"limits": RunLimits(output_bytes=DEFAULT_OUTPUT_BYTES)})
    assert applied_limits(asked).limits.output_bytes == DEFAULT_OUTPUT_BYTES


def test_the_build_archive_is_read_strictly() -> None:
    good = b"D 755 0 3\npkgF 644 5 11\npkg/A.class" + b"hello"
    entries, error = parse_archive(good)
    assert error is None and entries["pkg"].data is None and entries["pkg/A.class"].data == b"hello"
    over = good + b"E over\n"
    assert "over" in (parse_archive(over)[1] or "")
    bad_ones = (b"F 644 5 9\n../escape" + b"hello", b"F 644 99 1\nA" + b"x", b"X 1 2 3\n")
    for bad in (*bad_ones, b"D 999 0 1\nA"):
        assert parse_archive(bad)[1] is not None, bad


def test_a_runner_never_sweeps_its_own_uid() -> None:
    """Without root every slot runs as the runner's own uid: never swept, never switched."""
    with pytest.raises(ValueError):
        kill_uid(os.getuid())
    argv, extra = as_uid(["bwrap"], os.geteuid())
    assert argv == ["bwrap"] and extra == {}
