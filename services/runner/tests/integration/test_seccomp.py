"""The sandbox's seccomp filters (issue 29, item 9), through the real runner.

One case tries every call the filters deny, each from Python through `syscall(2)` so that no
library wrapper stands between, and prints what the kernel answered; the case itself completes
(a denied call fails with its errno, it kills nothing). Each answer is the filter's own errno —
where the sandbox would refuse anyway (no capability, no more user namespaces) the errno it
would give differs (EACCES, ENOSPC…), so the filter is what answered — and `/proc/self/status`
shows both filters stacked (bwrap's, then the init's).
"""

from __future__ import annotations

import errno

import pytest

from quiz_contracts.runner import RunCase, RunFile, RunLimits, RunRequest
from quiz_runner.sandbox.seccomp import PROGRAM_DENIED, SANDBOX_DENIED
from quiz_runner.service import RunnerService

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

LIMITS = RunLimits(cpu_s=2, wall_s=10, memory_mb=128, processes=8, output_bytes=8192)

# x86-64 numbers: no wrapper, no library retry (glibc's clone3 fallback, say) in between.
PROBE = r"""
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long

KEEP = []

def cs(text):
    # the address of a NUL-terminated copy of text, kept alive
    KEEP.append(ctypes.create_string_buffer(text))
    return ctypes.addressof(KEEP[-1])

def call(nr, *args):
    r = libc.syscall(L(nr), *(L(a) for a in args))
    e = ctypes.get_errno()
    return "OK" if r >= 0 else errno.errorcode.get(e, str(e)), r

def show(name, nr, *args, child_exits=False):
    verdict, r = call(nr, *args)
    if child_exits and r == 0:
        os._exit(0)  # a clone that was let through: the child leaves at once
    if verdict == "OK" and r > 2 and name.startswith("socket"):
        os.close(r)
    print(f"{name}={verdict}", flush=True)

buf = ctypes.create_string_buffer(64)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)
uring = ctypes.create_string_buffer(120)
perf = ctypes.create_string_buffer(128)
ctypes.memmove(perf, (ctypes.c_uint32 * 2)(1, 128), 8)  # PERF_TYPE_SOFTWARE, size
for name, family in [("vsock", 40), ("netlink", 16), ("packet", 17), ("bluetooth", 31),
                     ("alg", 38), ("appletalk", 5), ("unspec", 0),
                     ("vsock_high_bits", 40 | 1 << 32), ("unix", 1), ("inet", 2), ("inet6", 10)]:
    show(f"socket_{name}", 41, family, socket.SOCK_STREAM if family in (1, 2, 10) else 2, 0)
show("ptrace", 101, 0, 0, 0, 0)  # PTRACE_TRACEME
show("process_vm_readv", 310, os.getpid(), ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
show("kcmp", 312, os.getpid(), os.getpid(), 0, 0, 0)
show("bpf", 321, 0, ctypes.addressof(buf), 64)
show("keyctl", 250, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
show("add_key", 248, cs(b"user"), cs(b"k"), cs(b"v"), 1, -2)
show("userfaultfd", 323, 0)
show("perf_event_open", 298, ctypes.addressof(perf), 0, -1, -1, 0)
show("io_uring_setup", 425, 1, ctypes.addressof(uring))
show("syslog", 103, 10, 0, 0)  # SYSLOG_ACTION_SIZE_BUFFER
show("mount", 165, cs(b"none"), cs(b"/tmp"), cs(b"tmpfs"), 0, 0)
show("umount2", 166, cs(b"/tmp"), 2)
show("fsopen", 430, cs(b"tmpfs"), 0)
show("chroot", 161, cs(b"/tmp"))
show("unshare_user", 272, 0x10000000)
show("unshare_mount", 272, 0x00020000)
show("setns", 308, os.open("/proc/self/ns/uts", os.O_RDONLY), 0)
show("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0, child_exits=True)
show("clone3", 435, ctypes.addressof(buf), 64, child_exits=True)  # flags 0: a fork
status = open("/proc/self/status").read()
print("seccomp_mode=" + status.split("Seccomp:")[1].split()[0])
print("seccomp_filters=" + status.split("Seccomp_filters:")[1].split()[0])
print("fork_still_works=" + ("OK" if os.waitpid(os.fork() or os._exit(0) or 0, 0) else "?"))
"""

DENIED = {
    **{
        f"socket_{family}": "EAFNOSUPPORT"
        for family in (
            "vsock netlink packet bluetooth alg appletalk unspec vsock_high_bits"
        ).split()
    },
    **{
        name: "EPERM"
        for name in (
            "ptrace process_vm_readv kcmp bpf keyctl add_key userfaultfd perf_event_open "
            "io_uring_setup syslog mount umount2 fsopen chroot unshare_user unshare_mount setns "
            "clone_newuser"
        ).split()
    },
    "clone3": "ENOSYS",
}
ALLOWED = {"socket_unix": "OK", "socket_inet": "OK", "socket_inet6": "OK"}


async def test_every_denied_call_fails_with_the_filters_errno(runner: RunnerService) -> None:
    if runner.sandbox.name != "bwrap":
        pytest.skip("the seccomp filters are bwrap's and the init's (docker: the engine's)")
    reply = await runner.run(
        RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=PROBE)],
            cases=[RunCase(name="probe")],
            limits=LIMITS,
        )
    )
    case = reply.cases[0]
    assert case.completed and case.exit_code == 0, (case.stdout, case.stderr)
    answers = dict(line.split("=", 1) for line in case.stdout.splitlines())
    assert {k: answers.get(k) for k in DENIED} == DENIED
    assert {k: answers.get(k) for k in ALLOWED} == ALLOWED
    # Mode 2 (filter), two filters: bwrap's for the sandbox and the init's for the program.
    assert answers["seccomp_mode"] == "2"
    assert int(answers["seccomp_filters"]) >= 2
    assert answers["fork_still_works"] == "OK"


def test_the_lists_name_the_issues_calls() -> None:
    """What issue 29 asks to be denied is in the filters (docs/runner.md lists them all)."""
    sandbox = {d.syscall: d.errno for d in SANDBOX_DENIED}
    program = {d.syscall: d.errno for d in PROGRAM_DENIED}
    for call in ("ptrace", "bpf", "keyctl", "userfaultfd", "perf_event_open"):
        assert sandbox[call] == errno.EPERM
    assert program["mount"] == errno.EPERM
