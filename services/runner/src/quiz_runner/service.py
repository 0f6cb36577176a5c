"""The runner's logic: check a request, take a slot, compile once, run every case, reply."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import (
    MAX_ARGS,
    MAX_ARGV_BYTES,
    MAX_CASES,
    MAX_CASES_WIRE_BYTES,
    MAX_FILE_BYTES_IN,
    MAX_FILES,
    MAX_FILES_WIRE_BYTES,
    MAX_OUTPUT_TOTAL_BYTES,
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    MAX_STDIN_BYTES,
    MEMORY_FLOOR_MB,
    CaseResult,
    CompileResult,
    Picture,
    RunCase,
    RunLanguage,
    RunLimits,
    RunReply,
    RunRequest,
    max_output_bytes,
    text_and_b64,
)
from quiz_runner.languages import (
    WORK_DIR,
    Plan,
    Toolchain,
    build_plan,
    check_file_path,
    java_main,
    parse_language,
    with_main_class,
)
from quiz_runner.metrics import RunnerMetrics
from quiz_runner.pictures import make_picture, picture_output_floor
from quiz_runner.replies import ReplyBudget
from quiz_runner.sandbox.base import (
    ExecLimits,
    Execution,
    Job,
    Sandbox,
)
from quiz_runner.slots import Slots

# The one run of a picture with no case given: empty stdin, no args (the platform's IMAGE_CASE).
PICTURE_CASE = "image"


@dataclass(frozen=True)
class CompileLimits:
    """Server-side limits of the compile step."""

    wall_s: float = 30.0
    cpu_s: int = 30
    memory_mb: int = 2048
    processes: int = 64
    output_bytes: int = 32 * 1024


# Files and directories each writable tmpfs of a case (work dir, /tmp, /dev/shm) may hold, and
# each of the compile step's (/build, /tmp, /dev/shm): kernel memory is spent per inode, and a
# tmpfs's size does not bound how many empty files it holds.
CASE_TMPFS_INODES = 4096
COMPILE_TMPFS_INODES = 16384
COMPILE_TMPFS_BYTES = 256 * 1024 * 1024


def _refuse(message: str) -> ContractError:
    return ContractError(ErrorCode.limit_exceeded, message)


def validate_request(req: RunRequest) -> tuple[RunLanguage, str, dict[str, bytes]]:
    """The language, the entry path and the decoded files, or the ContractError that refuses."""
    language = parse_language(req.language)
    over = req.limits.over_maxima()
    if over:
        raise _refuse(f"over the hard maxima: {', '.join(over)}")
    floor = MEMORY_FLOOR_MB[language.value]
    if req.limits.memory_mb < floor:
        raise _refuse(
            f"memory_mb {req.limits.memory_mb} is under the floor of {language.value}: "
            f"{floor} MiB (its runtime alone needs about that)"
        )
    if len(req.cases) > MAX_CASES:
        raise _refuse(f"{len(req.cases)} cases, at most {MAX_CASES}")
    if len(req.files) > MAX_FILES:
        raise _refuse(f"{len(req.files)} files, at most {MAX_FILES}")
    files: dict[str, bytes] = {}
    for f in req.files:
        path = check_file_path(f.path)
        if path in files:
            raise ContractError(ErrorCode.invalid_request, f"file {path!r} given twice")
        try:
            data = f.content_bytes()
        except ValueError:
            raise ContractError(ErrorCode.invalid_request, f"file {path!r}: bad base64") from None
        if len(data) > MAX_FILE_BYTES_IN:
            raise _refuse(f"file {path!r} is {len(data)} bytes, at most {MAX_FILE_BYTES_IN}")
        files[path] = data
    # A file and a directory of the same name cannot both exist.
    for path in files:
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                raise ContractError(ErrorCode.invalid_request, f"{path!r} is under a file")
    entry = req.entry or req.files[0].path
    if entry not in files:
        raise ContractError(ErrorCode.invalid_request, f"entry {entry!r} is not among the files")
    for case in req.cases:
        if len(case.stdin.encode()) > MAX_STDIN_BYTES:
            raise _refuse(f"case {case.name!r}: stdin over {MAX_STDIN_BYTES} bytes")
        if len(case.args) > MAX_ARGS:
            raise _refuse(f"case {case.name!r}: more than {MAX_ARGS} args")
        if sum(len(a.encode()) for a in case.args) > MAX_ARGV_BYTES:
            raise _refuse(f"case {case.name!r}: args over {MAX_ARGV_BYTES} bytes")
        if any("\x00" in a for a in case.args):
            raise ContractError(ErrorCode.invalid_request, "an arg holds a NUL byte")
    if req.picture is not None and req.picture.source == "file":
        check_file_path(req.picture.path)
    check_message_sizes(req)
    return language, entry, files


def check_message_sizes(req: RunRequest) -> None:
    """Refuse what one NATS message each way cannot carry (quiz_contracts.runner, "Sizes on
    the bus"): the files and the cases as they travel, the whole request, and the output its
    cases may print (2 × output_bytes × cases, a picture with no case being one)."""
    files_wire = sum(len(f.model_dump_json()) for f in req.files)
    if files_wire > MAX_FILES_WIRE_BYTES:
        raise _refuse(
            f"the files take {files_wire} bytes as they travel, at most {MAX_FILES_WIRE_BYTES} "
            "(MAX_FILES_WIRE_BYTES; base64 takes 4 bytes per 3)"
        )
    cases_wire = sum(len(c.model_dump_json()) for c in req.cases)
    if cases_wire > MAX_CASES_WIRE_BYTES:
        raise _refuse(
            f"the cases (stdin, args, names) take {cases_wire} bytes as they travel, at most "
            f"{MAX_CASES_WIRE_BYTES} (MAX_CASES_WIRE_BYTES)"
        )
    # The rest (limits, entry, picture) is small, but a picture's path is not bounded by itself.
    size = len(req.model_dump_json())
    if size > MAX_REQUEST_BYTES:
        raise _refuse(f"the request takes {size} bytes, at most {MAX_REQUEST_BYTES}")
    runs = case_count(req)
    output_bytes = req.limits.output_bytes_for(runs)
    output = 2 * output_bytes * runs
    if output > MAX_OUTPUT_TOTAL_BYTES:
        raise _refuse(
            f"output_bytes {output_bytes} on stdout and stderr of {runs} cases is "
            f"{output} bytes, over the {MAX_OUTPUT_TOTAL_BYTES} one reply carries "
            f"(MAX_OUTPUT_TOTAL_BYTES): output_bytes at most {max_output_bytes(runs)} for "
            f"{runs} cases"
        )


def case_count(req: RunRequest) -> int:
    """The cases a request runs: its own, or the one a picture with no case draws."""
    return len(req.cases) or (1 if req.picture is not None else 0)


def applied_limits(req: RunRequest) -> RunRequest:
    """`req` with the limits it runs under: `output_bytes` filled in when it named none, the
    most that fits for its cases (quiz_contracts.runner.default_output_bytes)."""
    return req.model_copy(update={"limits": req.limits.applied(case_count(req))})


def case_limits(
    limits: RunLimits, plan: Plan, *, output_floor: int = 0, file_floor: int = 0
) -> ExecLimits:
    """Kernel-level limits of one case: the request's, plus what the runtime itself reserves."""
    file_bytes = max(limits.file_bytes, file_floor)
    return ExecLimits(
        cpu_ms=max(1, math.ceil(limits.cpu_s * 1000)),
        wall_s=limits.wall_s,
        address_mb=limits.memory_mb + plan.extra_address_mb,
        processes=limits.processes + plan.extra_processes,
        # RunnerService.run fills output_bytes in (applied_limits); a bare RunLimits is one case.
        output_bytes=max(limits.output_bytes_for(1), output_floor),
        file_bytes=file_bytes,
        memory_mb=limits.memory_mb,
        tmpfs_bytes=max(4 * file_bytes, 8 * 1024 * 1024),
        tmpfs_inodes=CASE_TMPFS_INODES,
        judge_rss=plan.judge_rss,
        data_mb=None if plan.extra_data_mb is None else limits.memory_mb + plan.extra_data_mb,
    )


def case_result(name: str, ex: Execution, *, keep_stdout: bool = True) -> CaseResult:
    """Wire form of one execution."""
    stdout, stdout_b64 = text_and_b64(ex.stdout if keep_stdout else b"")
    stderr, stderr_b64 = text_and_b64(ex.stderr)
    return CaseResult(
        name=name,
        stdout=stdout,
        stdout_b64=stdout_b64,
        stderr=stderr,
        stderr_b64=stderr_b64,
        exit_code=ex.exit_code,
        signal=ex.signal,
        cpu_ms=ex.cpu_ms,
        wall_ms=ex.wall_ms,
        timed_out=ex.timed_out,
        output_truncated=ex.output_truncated,
        memory_exceeded=ex.memory_exceeded,
    )


class RunnerService:
    """Compile once and run N cases in a sandbox, one request per slot."""

    def __init__(
        self,
        sandbox: Sandbox,
        slots: Slots,
        state_dir: Path,
        *,
        tools: Toolchain | None = None,
        compile_limits: CompileLimits | None = None,
        uids: Sequence[int],
        metrics: RunnerMetrics | None = None,
        reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        self.sandbox = sandbox
        self.slots = slots
        self.metrics = metrics or RunnerMetrics()
        self.metrics.slots.set(slots.total)
        self.state_dir = state_dir
        self.tools = tools or Toolchain()
        self.compile_limits = compile_limits or CompileLimits()
        if len(uids) < slots.total:
            raise ValueError(f"{slots.total} slots need as many uids, got {len(uids)}")
        # One claimed host uid per slot (quiz_runner.uids): the sweep after a job kills its uid.
        # A runner without root has one uid for every slot, its own, and sweeps nothing.
        self.uids = list(uids)
        # The largest reply one message carries (MAX_REPLY_BYTES, less if the server's
        # max_payload is smaller).
        self.reply_bytes = reply_bytes

    def languages(self) -> list[RunLanguage]:
        """Languages whose toolchain this host has."""
        return [
            lang
            for lang in RunLanguage
            if all(os.access(b, os.X_OK) for b in self.tools.binaries(lang))
        ]

    async def run(self, req: RunRequest) -> RunReply:
        """Answer runner.v1.run; raises ContractError for refusals (busy, limits, language)."""
        started = time.monotonic()
        req = applied_limits(req)
        try:
            language, entry, files = validate_request(req)
            if language not in self.languages():
                raise ContractError(
                    ErrorCode.unsupported_language, f"{language.value} is not installed here"
                )
            cases = list(req.cases)
            if req.picture is not None and not cases:
                cases = [RunCase(name=PICTURE_CASE)]
            budget = ReplyBudget(
                self.reply_bytes,
                language=language.value,
                backend=self.sandbox.name,
                case_names=[c.name for c in cases],
                compile_output_bytes=self.compile_limits.output_bytes,
                picture=req.picture,
                limits=req.limits,
            )
            with self.slots.take() as slot:
                self.metrics.slots_busy.set(self.slots.busy)
                try:
                    reply = await self._run_in_slot(
                        req, language, entry, files, cases, budget, slot
                    )
                finally:
                    self.metrics.slots_busy.set(self.slots.busy - 1)
        except ContractError as exc:
            # The label takes known languages only: a request must not mint new series.
            known = req.language if req.language in RunLanguage.__members__ else "other"
            self.metrics.requests.labels(language=known, outcome=exc.code.value).inc()
            raise
        outcome = "ok" if reply.compile.ok else "compile_failed"
        self.metrics.requests.labels(language=language.value, outcome=outcome).inc()
        self.metrics.request_seconds.labels(language=language.value).observe(
            time.monotonic() - started
        )
        return reply

    async def _run_in_slot(
        self,
        req: RunRequest,
        language: RunLanguage,
        entry: str,
        files: dict[str, bytes],
        cases: list[RunCase],
        budget: ReplyBudget,
        slot: int,
    ) -> RunReply:
        uid = self.uids[slot]
        job = Job(uid=uid, files=files)
        try:
            await self.sandbox.prepare(job)
            plan = build_plan(language, entry, list(files), req.limits.memory_mb, self.tools)
            compiled, plan = await self._compile(job, plan, entry)
            budget.compiled(compiled)
            reply = RunReply(
                language=language.value,
                compile=compiled,
                backend=self.sandbox.name,
                limits=req.limits,
            )
            if not compiled.ok:
                return reply
            for index, case in enumerate(cases):
                result, picture = await self._run_case(job, plan, req, case, index == 0)
                if picture is not None:
                    budget.drawn(picture)
                    reply.picture = picture
                reply.cases.append(budget.fit(result))
            return reply
        finally:
            # The end-of-request sweep, O(1): the backend ends the request's pid namespace(s),
            # and the kernel every process in them (bwrap: its pid 1 held by a pidfd).
            await self.sandbox.release(job)

    async def _compile(self, job: Job, plan: Plan, entry: str) -> tuple[CompileResult, Plan]:
        """The compile step, and the plan that runs what it built (Java: the class with main)."""
        if plan.compile is None:
            return CompileResult(ok=True), plan
        lim = self.compile_limits
        ex = await self.sandbox.compile(
            job,
            plan.compile,
            ExecLimits(
                cpu_ms=lim.cpu_s * 1000,
                wall_s=lim.wall_s,
                address_mb=lim.memory_mb + plan.extra_address_mb,
                processes=lim.processes + plan.extra_processes,
                output_bytes=lim.output_bytes,
                file_bytes=COMPILE_TMPFS_BYTES // 2,
                memory_mb=lim.memory_mb,
                tmpfs_bytes=COMPILE_TMPFS_BYTES,
                tmpfs_inodes=COMPILE_TMPFS_INODES,
            ),
        )
        self.metrics.sandbox_seconds.labels(step="compile").observe(ex.wall_ms / 1000)
        raw = (ex.stdout + ex.stderr)[: lim.output_bytes]
        ok = ex.exit_code == 0 and ex.timed_out is None
        if ok and ex.build_error is not None:
            ok, raw = False, f"{ex.build_error}\n".encode()
        elif ok and plan.language is RunLanguage.java:
            classes = {
                p: e.data
                for p, e in job.build.items()
                if p.endswith(".class") and e.data is not None
            }
            try:
                plan = with_main_class(plan, java_main(classes, entry))
            except ValueError as exc:
                ok, raw = False, f"{exc}\n".encode()
        output, output_b64 = text_and_b64(raw)
        result = CompileResult(
            ok=ok,
            output=output,
            output_b64=output_b64,
            output_truncated=ex.output_truncated,
            timed_out=ex.timed_out is not None,
            wall_ms=ex.wall_ms,
        )
        return result, plan

    async def _run_case(
        self, job: Job, plan: Plan, req: RunRequest, case: RunCase, first: bool
    ) -> tuple[CaseResult, Picture | None]:
        """Run one case; the first one also yields the picture when the request asks for it."""
        spec = req.picture if first else None
        collect = None
        output_floor = file_floor = 0
        if spec is not None:
            # The picture always fits whole under the default limits.
            size = picture_output_floor(spec)
            if spec.source == "file":
                collect = f"{WORK_DIR}/{spec.path}"
                file_floor = size
            else:
                output_floor = size
        limits = case_limits(req.limits, plan, output_floor=output_floor, file_floor=file_floor)
        ex = await self.sandbox.run(
            job, [*plan.run, *case.args], case.stdin.encode(), limits, collect
        )
        self.metrics.sandbox_seconds.labels(step="case").observe(ex.wall_ms / 1000)
        self.metrics.cases.labels(outcome=_case_outcome(ex)).inc()
        result = case_result(case.name, ex, keep_stdout=spec is None or spec.source == "file")
        if spec is None:
            return result, None
        data = ex.collected if spec.source == "file" else ex.stdout
        picture = await asyncio.to_thread(make_picture, data or b"", spec)
        return result, picture


def _case_outcome(ex: Execution) -> str:
    if ex.timed_out:
        return f"timeout_{ex.timed_out}"
    if ex.memory_exceeded:
        return "memory"
    if ex.output_truncated:
        return "truncated"
    if ex.signal:
        return "signal"
    return "exit_0" if ex.exit_code == 0 else "exit_nonzero"


async def self_test(sandbox: Sandbox, uid: int) -> None:
    """Start one sandbox running `true`; raise RuntimeError saying why when it cannot.

    bwrap only (the docker backend has checked its engine and image already): a host without
    unprivileged user namespaces, or a bwrap that cannot start as `uid`, stops the runner at
    start-up with bwrap's own words instead of failing every job.
    """
    if sandbox.name != "bwrap":
        return
    job = Job(uid=uid, files={})
    limits = ExecLimits(
        cpu_ms=5000,
        wall_s=30.0,
        address_mb=256,
        processes=8,
        output_bytes=8192,
        file_bytes=1 << 20,
        memory_mb=64,
        tmpfs_bytes=1 << 20,
        tmpfs_inodes=64,
    )
    try:
        ex = await sandbox.run(job, ["/usr/bin/true"], b"", limits, None)
    finally:
        await sandbox.release(job)
    if ex.exit_code != 0:
        said = ex.stderr.decode("utf-8", "replace").strip() or ex.init_error or "no message"
        why = f"the {sandbox.name} sandbox cannot start a program as uid {uid}: {said}"
        raise RuntimeError(why)
