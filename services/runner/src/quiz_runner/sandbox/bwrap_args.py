"""bwrap's arguments and the init's, for the bubblewrap backend (sandbox/bwrap.py).

Pure argument building: the request's sandbox (namespaces, the read-only toolchain, /dev,
/proc, the mount points, the environment), one step's (rlimits, fresh tmpfs, work dir, user),
and the operations that recreate a tree of the job's files from their fds.
"""

from __future__ import annotations

import os

from quiz_runner.languages import BUILD_DIR, SANDBOX_PATH_ENV, TMP_DIR, WORK_DIR
from quiz_runner.sandbox.base import BuildEntry, ExecLimits, Job, init_argv

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
STATUS_FD = "@3"  # the 4th fd of a step's message: stdin, stdout, stderr, status, [collect|archive]
SHM_DIR = "/dev/shm"  # noqa: S108 - a path inside the sandbox


def request_args(ro_paths: list[str]) -> list[str]:
    """Namespaces, session, toolchain binds (`ro_paths`), /dev, /proc, the mount points,
    environment.

    Once per request. Each step's init mounts its own writable tmpfs (/work or /build,
    /tmp, /dev/shm) and /proc over these, in namespaces of its own.
    """
    args = [
        "--unshare-all",  # user, pid, net (loopback only, down), ipc, uts, cgroup
        "--unshare-user",
        # The init is pid 1 (and bwrap stays outside the pid namespace, its arguments with
        # it); each step's init nests the program's user namespace and forbids further ones.
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
    for path in ro_paths:
        args += ["--ro-bind", path, path]
    for link in TOP_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # /dev itself is a tmpfs without limits: nothing may be written there.
        "--remount-ro",
        "/dev",
        "--dir",
        TMP_DIR,
        "--dir",
        WORK_DIR,
        "--dir",
        BUILD_DIR,
        "--clearenv",
        "--setenv",
        "PATH",
        SANDBOX_PATH_ENV,
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "HOME",
        TMP_DIR,
    ]
    return args


def step_args(limits: ExecLimits, writable: tuple[str, ...], workdir: str) -> list[str]:
    """The step's rlimits, its fresh tmpfs, its work dir and the user it becomes."""
    # +1: the step's init (its pid 1) counts among the program's user's processes.
    args = init_argv(limits, init="run", pid1_processes=1, status=STATUS_FD)
    for path in writable:
        args += ["--tmpfs", f"{path}:{limits.tmpfs_bytes}:{limits.tmpfs_inodes}"]
    return [*args, "--chdir", workdir, "--userns", str(SANDBOX_UID)]


def tree(
    job: Job, area: str, root: str, entries: dict[str, BuildEntry], key: str = ""
) -> tuple[list[str], list[int]]:
    """bwrap operations that recreate `entries` under `root` (already a tmpfs), and the job's
    fds they name (`job.memfd`).

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


def readonly_tree(
    job: Job, area: str, root: str, entries: dict[str, BuildEntry], key: str = ""
) -> tuple[list[str], list[int]]:
    """A tmpfs at `root` holding `entries`, then made read-only."""
    pages = sum(-(-len(e.data or b"") // 4096) * 4096 for e in entries.values())
    args = ["--size", str(pages + 1024 * 1024), "--tmpfs", root]
    ops, fds = tree(job, area, root, entries, key)
    return [*args, *ops, "--remount-ro", root], fds
