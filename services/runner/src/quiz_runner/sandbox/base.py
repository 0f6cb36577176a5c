"""What every sandbox backend offers, and what they share: the init, jobs, status and verdicts."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from quiz_runner.languages import INIT_PATH

INIT_SOURCE = Path(__file__).with_name("runner_init.c")

# Messages runtimes print when an allocation fails (RLIMIT_AS, a heap limit): the kernel is mute.
_MEMORY_MARKERS = (
    b"MemoryError",
    b"std::bad_alloc",
    b"JavaScript heap out of memory",
    b"java.lang.OutOfMemoryError",
    b"Cannot allocate memory",
    b"out of memory",
    b"Could not reserve enough space",
    b"Array buffer allocation failed",  # Node: a Buffer or typed array past RLIMIT_DATA
)
_STATUS = re.compile(rb"^(exit|signal) (\d+) cpu_us (\d+) maxrss_kb (\d+)( killed cpu)?\n?$")

# The compile step's output (the build dir) travels from its sandbox to every case's: bounded.
MAX_BUILD_BYTES = 64 * 1024 * 1024
MAX_BUILD_FILES = 256  # files and directories; each case receives every one of them


@dataclass(frozen=True)
class ExecLimits:
    """Limits of one sandboxed process tree, in the units the init and the kernel take."""

    cpu_ms: int  # CPU time of the program, judged to the millisecond (RLIMIT_CPU: the backstop)
    wall_s: float
    address_mb: int
    processes: int
    output_bytes: int
    file_bytes: int
    memory_mb: int  # the program's own budget, for the memory_exceeded verdict
    tmpfs_bytes: int  # size of each writable tmpfs (work dir, /tmp, /dev/shm; /build to compile)
    tmpfs_inodes: int  # files and directories each writable tmpfs may hold
    # memory_exceeded also from the peak RSS (native code); runtimes with their own heap limit
    # (JVM, V8) say so themselves when it stops them.
    judge_rss: bool = True
    # RLIMIT_DATA, MiB (writable private memory actually mapped); None: not set. For runtimes
    # whose RLIMIT_AS is mostly reservations (V8), so memory outside their heap is bounded too.
    data_mb: int | None = None


def watch_children_with_pidfds() -> bool:
    """Learn of child exits through pidfds on the running loop, not a thread per child.

    Python 3.11's default (ThreadedChildWatcher) starts and joins a thread for every process:
    ~2 ms of each sandboxed case here. Python 3.12 uses pidfds by itself; Linux ≥ 5.3 has them.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.get_event_loop_policy().set_child_watcher(watcher)
    return True


def init_argv(
    limits: ExecLimits, *, init: str = INIT_PATH, pid1_processes: int, status: str
) -> list[str]:
    """The sandbox init and the rlimits it applies to the program (the same on every backend).

    `pid1_processes` counts the processes of the program's user that are not the program's
    (the init, the sandbox's pid 1), so the program gets exactly `limits.processes`.
    """
    return [
        init,
        "--reap",
        "--cpu-ms",
        str(limits.cpu_ms),
        "--as",
        str(limits.address_mb * 1024 * 1024),
        *(["--data", str(limits.data_mb * 1024 * 1024)] if limits.data_mb else []),
        "--nproc",
        str(limits.processes + pid1_processes),
        "--fsize",
        str(limits.file_bytes),
        "--nofile",
        "256",
        "--status",
        status,
    ]


def archive_argv(directory: str, out: str) -> list[str]:
    """Init options that archive `directory` (the build) to `out` once the program is done."""
    return [
        "--archive",
        directory,
        "--archive-out",
        out,
        "--archive-max",
        str(MAX_BUILD_BYTES),
        "--archive-max-files",
        str(MAX_BUILD_FILES),
    ]


@dataclass
class Execution:
    """How one sandboxed process tree ended."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int | None = None
    signal: str | None = None
    cpu_ms: int = 0
    wall_ms: int = 0
    timed_out: Literal["cpu", "wall"] | None = None
    output_truncated: bool = False
    memory_exceeded: bool = False
    collected: bytes | None = None
    maxrss_kb: int = 0
    init_error: str | None = None  # the init reported nothing (killed, or failed to start)
    build_error: str | None = None  # the compile step's build dir could not be carried over


@dataclass(frozen=True)
class BuildEntry:
    """One entry of the build dir: a directory (data None) or a regular file."""

    mode: int
    data: bytes | None = None


@dataclass
class Job:
    """One request: its files, what its compile step built, the uid its sandboxes run as.

    The sandboxes receive copies of these bytes (bwrap: through file descriptors; docker:
    through a host dir the runner writes under its own tmpfs), never a host path of the job.
    """

    uid: int
    files: dict[str, bytes]
    build: dict[str, BuildEntry] = field(default_factory=dict)
    root: Path | None = None  # docker only: the host dir bound into its containers
    mounted: bool = False  # docker only: root is a tmpfs of its own
    memfds: dict[tuple[str, str], int] = field(default_factory=dict)  # bwrap: (area, path) → fd
    session: object | None = None  # bwrap: the request's sandbox (sandbox.bwrap_session.Session)

    @property
    def entries(self) -> list[str]:
        """Top-level names of the job's files (each one becomes a read-only entry of /work)."""
        return sorted({rel.split("/", 1)[0] for rel in self.files})

    def memfd(self, area: str, path: str, data: bytes) -> int:
        """An fd holding `data`, made once per job and rewound for each sandbox that reads it."""
        fd = self.memfds.get((area, path))
        if fd is None:
            fd = os.memfd_create(f"{area}:{path}"[:240], os.MFD_CLOEXEC)
            self.memfds[(area, path)] = fd
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def close(self) -> None:
        """Close the job's descriptors."""
        for fd in self.memfds.values():
            os.close(fd)
        self.memfds.clear()


class Sandbox(Protocol):
    """A backend: compile once (its build dir carried to `job.build`), then each case afresh."""

    name: str

    async def prepare(self, job: Job) -> None: ...

    async def compile(self, job: Job, argv: list[str], limits: ExecLimits) -> Execution: ...

    async def run(
        self,
        job: Job,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution: ...

    async def release(self, job: Job) -> None: ...

    def ready(self) -> tuple[bool, str]: ...


def ensure_init(state_dir: Path) -> Path:
    """Build quiz-runner-init (static when the host can) once per source version."""
    source = INIT_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = state_dir / "init" / f"quiz-runner-init-{digest}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{uuid.uuid4().hex}")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler to build the sandbox init")
    base = [cc, "-O2", "-Wall", "-o", str(tmp), str(INIT_SOURCE)]
    # Static, so the same binary also runs in the docker image whatever its libc.
    done = subprocess.run([*base, "-static"], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(base, capture_output=True, check=True)
    os.chmod(tmp, 0o755)  # noqa: S103 - executed read-only in sandboxes
    os.replace(tmp, target)
    return target


def parse_archive(data: bytes) -> tuple[dict[str, BuildEntry], str | None]:
    """The build dir the init archived ("D|F <mode> <size> <pathlen>\\n<path>[<data>]"...).

    Returns the entries and None, or what is wrong: over MAX_BUILD_BYTES/MAX_BUILD_FILES, or a
    malformed archive. Paths are checked like request paths: relative, no '.', '..' or ''.
    """
    entries: dict[str, BuildEntry] = {}
    at = 0
    while at < len(data):
        end = data.find(b"\n", at, at + 96)
        if end < 0:
            return entries, "the build archive is malformed"
        head = data[at:end].split(b" ")
        if head == [b"E", b"over"]:
            return entries, (
                f"the build output is over {MAX_BUILD_BYTES // (1024 * 1024)} MiB or "
                f"{MAX_BUILD_FILES} files"
            )
        if len(head) != 4 or head[0] not in (b"D", b"F") or not all(h.isdigit() for h in head[1:]):
            return entries, "the build archive is malformed"
        try:
            mode, size, path_len = int(head[1], 8), int(head[2]), int(head[3])
        except ValueError:  # a mode that is not octal
            return entries, "the build archive is malformed"
        path_start = end + 1
        data_start = path_start + path_len
        try:
            path = data[path_start:data_start].decode("utf-8")
        except UnicodeDecodeError:
            return entries, "a build file name is not UTF-8"
        parts = path.split("/")
        if not path or any(p in ("", ".", "..") for p in parts) or len(path) != path_len:
            return entries, "the build archive is malformed"
        if head[0] == b"D":
            entries[path] = BuildEntry(mode)
            at = data_start
        else:
            if data_start + size > len(data):
                return entries, "the build archive is cut short"
            entries[path] = BuildEntry(mode, data[data_start : data_start + size])
            at = data_start + size
    return entries, None


def uid_pids(uid: int) -> list[int]:
    """Host pids of live processes whose real uid is `uid`.

    Zombies are left out: they run nothing, and the sandbox's pid 1 becomes one of the host
    init, which may reap it late.
    """
    pids = []
    needle = f"\nUid:\t{uid}\t".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                status = fh.read()
        except OSError:
            continue
        if needle in status and b"\nState:\tZ" not in status:
            pids.append(int(name))
    return pids


def kill_uid(uid: int, wait_s: float = 2.0) -> int:
    """SIGKILL every host process of the slot's uid and wait until they are gone.

    Never uid 0, and never this process's own uid (a runner without root runs its sandboxes
    as itself: sweeping that uid would kill the runner and its user's session).
    """
    if uid == 0 or uid == os.getuid():
        raise ValueError(f"refusing to sweep uid {uid}")
    killed = 0
    deadline = time.monotonic() + wait_s
    while pids := uid_pids(uid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return killed


def sweepable(uid: int) -> bool:
    """Whether the processes of `uid` may be swept: a slot uid of a runner started as root."""
    return uid not in (0, os.getuid())


def signal_name(signo: int) -> str:
    """SIGKILL for 9, etc.; SIG<n> for numbers Python does not name."""
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"SIG{signo}"


def apply_status(result: Execution, status: bytes, limits: ExecLimits) -> None:
    """Fill exit code, signal, CPU and the CPU verdict from the init's status line."""
    m = _STATUS.match(status.strip() + b"\n") if status else None
    if m is None:
        if result.timed_out is None and result.init_error is None:
            result.init_error = "the sandbox init reported no status"
        return
    kind, value, cpu_us, maxrss, killed_cpu = m.groups()
    result.cpu_ms = int(cpu_us) // 1000
    result.maxrss_kb = int(maxrss)
    if kind == b"exit":
        result.exit_code = int(value)
    else:
        result.signal = signal_name(int(value))
    if result.timed_out is not None:
        return
    # The init killed it at the limit; or RLIMIT_CPU did (SIGXCPU at the soft limit, SIGKILL at
    # the hard one); or it ended by itself but had used more CPU than it was given.
    rlimit_hit = result.signal == "SIGXCPU" or (
        result.signal == "SIGKILL" and result.cpu_ms >= -(-limits.cpu_ms // 1000) * 1000 - 50
    )
    if killed_cpu or rlimit_hit or int(cpu_us) > limits.cpu_ms * 1000:
        result.timed_out = "cpu"


def judge_memory(result: Execution, limits: ExecLimits) -> None:
    """memory_exceeded: the memory limit stopped the program.

    Only a program that did not succeed (non-zero exit or a signal) can have been stopped by
    it; then an allocation failure the runtime reported (its message on stderr), or, for native
    programs whose whole address space is their budget, a peak RSS at 95 % of it, says so. A
    program that exits 0 with its output is never flagged, whatever its runtime's footprint.
    """
    if result.exit_code == 0 and result.signal is None:
        return
    if limits.judge_rss and result.maxrss_kb >= limits.memory_mb * 1024 * 0.95:
        result.memory_exceeded = True
        return
    tail = result.stderr[-4096:]
    if any(marker in tail for marker in _MEMORY_MARKERS):
        result.memory_exceeded = True
