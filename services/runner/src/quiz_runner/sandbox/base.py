"""What every sandbox backend offers, and what they share: the init, job dirs, status parsing."""

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

# Messages runtimes print when an allocation fails under RLIMIT_AS: the kernel does not say.
_MEMORY_MARKERS = (
    b"MemoryError",
    b"std::bad_alloc",
    b"JavaScript heap out of memory",
    b"java.lang.OutOfMemoryError",
    b"Cannot allocate memory",
    b"out of memory",
    b"Could not reserve enough space",
)
_STATUS = re.compile(rb"^(exit|signal) (\d+) cpu_us (\d+) maxrss_kb (\d+)\n?$")


@dataclass(frozen=True)
class ExecLimits:
    """Limits of one sandboxed process tree, in the units the init and the kernel take."""

    cpu_s: int
    wall_s: float
    address_mb: int
    processes: int
    output_bytes: int
    file_bytes: int
    memory_mb: int  # the program's own budget (RSS / heap), for the memory_exceeded verdict
    tmpfs_bytes: int  # size of each writable tmpfs (work dir, /tmp, /dev/shm)


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


def init_argv(limits: ExecLimits, *, pid1_processes: int, status: str) -> list[str]:
    """The sandbox init and the rlimits it applies to the program (the same on every backend).

    `pid1_processes` counts the processes of the slot's uid that are not the program's (the
    sandbox's own pid 1, the init), so the program gets exactly `limits.processes`.
    """
    return [
        INIT_PATH,
        "--reap",
        "--cpu",
        str(limits.cpu_s),
        "--as",
        str(limits.address_mb * 1024 * 1024),
        "--nproc",
        str(limits.processes + pid1_processes),
        "--fsize",
        str(limits.file_bytes),
        "--nofile",
        "256",
        "--status",
        status,
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


@dataclass
class Job:
    """Host side of one request: its files, its build output, the slot's uid."""

    root: Path
    uid: int
    entries: list[str] = field(default_factory=list)  # top-level names under src/

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def build(self) -> Path:
        return self.root / "build"


class Sandbox(Protocol):
    """A backend: compile with the job's build dir writable, run each case in a fresh sandbox."""

    name: str

    async def compile(self, job: Job, argv: list[str], limits: ExecLimits) -> Execution: ...

    async def run(
        self,
        job: Job,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution: ...

    def ready(self) -> tuple[bool, str]: ...


def ensure_init(state_dir: Path) -> Path:
    """Build quiz-runner-init (static when the host can) once per source version."""
    source = INIT_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = state_dir / "init" / f"quiz-runner-init-{digest}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)  # noqa: S103 - the sandbox uids execute the init
    tmp = target.with_suffix(f".{uuid.uuid4().hex}")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler to build the sandbox init")
    base = [cc, "-O2", "-Wall", "-o", str(tmp), str(INIT_SOURCE)]
    # Static, so the same binary also runs in the docker image whatever its libc.
    done = subprocess.run([*base, "-static"], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(base, capture_output=True, check=True)
    os.chmod(tmp, 0o755)  # noqa: S103 - root-owned, executed read-only in sandboxes
    os.replace(tmp, target)
    return target


def make_job(state_dir: Path, uid: int, files: dict[str, bytes]) -> Job:
    """Write the job's files (root-owned, read-only to the sandbox) and a build dir for `uid`."""
    jobs = state_dir / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    # Traversal only (no listing) for the slot uids that bind their job's files.
    os.chmod(state_dir, 0o711)  # noqa: S103
    os.chmod(jobs, 0o711)  # noqa: S103
    root = jobs / uuid.uuid4().hex
    root.mkdir(mode=0o711)
    src = root / "src"
    src.mkdir(mode=0o755)
    for rel, data in files.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(data)
        os.chmod(path, 0o644)
    build = root / "build"
    build.mkdir(mode=0o700)
    os.chown(build, uid, uid)
    entries = sorted({rel.split("/", 1)[0] for rel in files})
    return Job(root=root, uid=uid, entries=entries)


def remove_job(job: Job) -> None:
    """Delete the job's host dir (the compile step may have left anything in build/)."""
    shutil.rmtree(job.root, ignore_errors=True)


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
    """SIGKILL every host process of the slot's uid and wait until they are gone (never uid 0)."""
    if uid == 0:
        raise ValueError("refusing to sweep uid 0")
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


def signal_name(signo: int) -> str:
    """SIGKILL for 9, etc.; SIG<n> for numbers Python does not name."""
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"SIG{signo}"


def apply_status(result: Execution, status: bytes, limits: ExecLimits) -> None:
    """Fill exit code, signal, CPU and verdicts from the init's status line."""
    m = _STATUS.match(status.strip() + b"\n") if status else None
    if m is None:
        if result.timed_out is None and result.init_error is None:
            result.init_error = "the sandbox init reported no status"
        return
    kind, value, cpu_us, maxrss = m.groups()
    result.cpu_ms = int(cpu_us) // 1000
    result.maxrss_kb = int(maxrss)
    if kind == b"exit":
        result.exit_code = int(value)
    else:
        signo = int(value)
        result.signal = signal_name(signo)
        # SIGXCPU at the soft limit, or SIGKILL at the hard one a second later.
        if result.timed_out is None and (
            signo == signal.SIGXCPU
            or (signo == signal.SIGKILL and result.cpu_ms >= limits.cpu_s * 1000 - 50)
        ):
            result.timed_out = "cpu"


def judge_memory(result: Execution, limits: ExecLimits) -> None:
    """memory_exceeded: an allocation failed (runtime message) or the RSS reached the budget."""
    if result.maxrss_kb >= limits.memory_mb * 1024 * 0.95:
        result.memory_exceeded = True
    elif result.exit_code != 0 or result.signal:
        tail = result.stderr[-4096:]
        if any(marker in tail for marker in _MEMORY_MARKERS):
            result.memory_exceeded = True
