"""The sandbox's seccomp filters (issue 29, item 9), compiled to BPF with libseccomp.

Two filters, stacked (the kernel applies both; the stricter answer wins):

- `SANDBOX_DENIED`, applied by bwrap (`--seccomp FD`) to everything in the sandbox, its init
  included: socket families other than AF_UNIX, AF_INET and AF_INET6 (AF_VSOCK, AF_NETLINK,
  AF_PACKET, Bluetooth, …) answer EAFNOSUPPORT; the calls that reach the kernel's riskiest or
  least needed surfaces (ptrace and its kin, bpf, the key store, userfaultfd, perf_event_open,
  io_uring, modules, kexec, reboot, swap, accounting, raw I/O ports, the kernel log, file
  handles) answer EPERM.
- `PROGRAM_DENIED`, applied by the sandbox init to each step's program just before execve
  (`runner_init.c`, `--seccomp FD`): mount and its new-API kin, pivot_root, chroot, unshare,
  setns, and clone with a namespace flag answer EPERM; clone3 answers ENOSYS (its flags are in
  memory, out of a filter's reach; libc falls back to clone, which the filter reads). bwrap
  cannot apply these: the init mounts each step's tmpfs and /proc and makes its namespaces
  after bwrap's filter is in force.

A denied call fails with its errno; the process is not killed, so a runtime that probes for a
feature carries on without it, and a program that insists gets a clear error. Calls of another
architecture (32-bit `int 0x80`) kill the thread: libseccomp's filter admits the native one only.

libseccomp is the system's `libseccomp.so.2` (Debian's `libseccomp2`, which apt itself needs),
reached through `pyseccomp` (PyPI: ctypes, the API of libseccomp's own Python bindings, which
Debian ships only for the system Python); see docs/runner.md, "Seccomp".
"""

from __future__ import annotations

import errno
import functools
import os
import socket
from dataclasses import dataclass

# Socket families a program may use: local sockets, and IPv4/IPv6 in a network namespace
# whose only interface is a loopback that is down (so no packet leaves).
ALLOWED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)

# Namespace flags of clone(2) (include/uapi/linux/sched.h). CLONE_NEWTIME (0x80) lies in
# clone(2)'s exit-signal byte: only clone3 and unshare can ask for it, and both are refused.
CLONE_NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}


@dataclass(frozen=True)
class Denied:
    """A system call the filter refuses with `errno`, and why (docs/runner.md lists these)."""

    syscall: str
    errno: int
    why: str


def _all(names: str, err: int, why: str) -> list[Denied]:
    return [Denied(name, err, why) for name in names.split()]


SANDBOX_DENIED: tuple[Denied, ...] = (
    *_all(
        "ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd",
        errno.EPERM,
        "another process's memory, registers or fds",
    ),
    Denied("bpf", errno.EPERM, "eBPF programs and maps"),
    *_all("keyctl add_key request_key", errno.EPERM, "the kernel key store"),
    Denied("userfaultfd", errno.EPERM, "page-fault handling from user space (exploit timing)"),
    Denied("perf_event_open", errno.EPERM, "performance counters (side channels)"),
    *_all(
        "io_uring_setup io_uring_enter io_uring_register",
        errno.EPERM,
        "io_uring (whose operations seccomp cannot see)",
    ),
    *_all(
        "init_module finit_module delete_module kexec_load kexec_file_load reboot",
        errno.EPERM,
        "kernel modules, another kernel, reboot",
    ),
    *_all("swapon swapoff acct quotactl", errno.EPERM, "swap, process accounting, quotas"),
    *_all("iopl ioperm", errno.EPERM, "raw I/O ports"),
    *_all("syslog", errno.EPERM, "the kernel log"),
    *_all("open_by_handle_at", errno.EPERM, "files by handle, around the mount table"),
    *_all("lookup_dcookie vhangup uselib personality", errno.EPERM, "legacy interfaces"),
)

PROGRAM_DENIED: tuple[Denied, ...] = (
    *_all(
        "mount umount2 pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick "
        "mount_setattr",
        errno.EPERM,
        "the mount table",
    ),
    *_all("unshare setns", errno.EPERM, "new or other namespaces"),
)


def _filter(denied: tuple[Denied, ...], *, families: bool, clone: bool) -> bytes:
    """A default-allow BPF program refusing `denied` (and socket families, namespace clones)."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for d in denied:
        f.add_rule(sc.ERRNO(d.errno), d.syscall)
    if families:
        # Allowed: 1, 2 and 10. The argument is compared whole (64 bits), so a family with
        # high bits set, which the kernel would truncate to an int, is over 10 and refused.
        refused = [0, *range(3, 10)]
        for call in ("socket", "socketpair"):
            for family in refused:
                f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.EQ, family))
            f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.GT, max(ALLOWED_FAMILIES)))
    if clone:
        for flag in CLONE_NAMESPACE_FLAGS.values():
            # x86-64 clone(flags, stack, parent_tid, child_tid, tls): flags first.
            f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            f.export_bpf(out)
        size = os.fstat(fd).st_size
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


@functools.cache
def sandbox_filter() -> bytes:
    """BPF for bwrap's `--seccomp`: SANDBOX_DENIED and the socket families."""
    return _filter(SANDBOX_DENIED, families=True, clone=False)


@functools.cache
def program_filter() -> bytes:
    """BPF the init applies to each program: PROGRAM_DENIED and namespace clones."""
    return _filter(PROGRAM_DENIED, families=False, clone=True)


def filter_fd(name: str, data: bytes) -> int:
    """`data` in a fresh memfd read from its start (bwrap reads the fd from its offset)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
