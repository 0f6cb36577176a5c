"""Slot uids claimed host-wide, so two runners on one host never sweep each other's sandboxes.

Each slot runs its sandboxes under its own host uid and, after every job, kills every process of
that uid. Two runners (two `make run`, or `make run` beside the test suite) that picked the same
uids would kill each other's cases. A uid is therefore claimed with an exclusive `flock` on
`<lock_dir>/<uid>.lock`, held for the life of the process: the kernel releases it when the
process dies, however it dies, so a crashed runner never leaves a uid claimed.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# root's lock directory: every runner started as root on a host shares it.
DEFAULT_LOCK_DIR = Path("/run/lock/quiz-runner")


def default_lock_dir(euid: int | None = None) -> Path:
    """Where the uid locks live: `/run/lock/quiz-runner` for root; a normal user's own
    directory otherwise (`$XDG_RUNTIME_DIR/quiz-runner`, else `/run/lock/quiz-runner-<uid>`,
    else `<tmp>/quiz-runner-<uid>` where /run/lock is not writable).

    Per user because root's is root's (0755): a normal user's `make test` on a host where root
    ran the runner got a raw PermissionError there (issue 34 item 8). Users cannot share slot
    uids anyway: only root switches to them.
    """
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return DEFAULT_LOCK_DIR
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK | os.X_OK):
        return Path(runtime) / "quiz-runner"
    if os.access("/run/lock", os.W_OK | os.X_OK):
        return Path(f"/run/lock/quiz-runner-{euid}")
    return Path(tempfile.gettempdir()) / f"quiz-runner-{euid}"


class UidsUnavailable(RuntimeError):
    """Fewer free uids in the configured range than slots: the runner must not start."""


def uid_in_use(uid: int) -> bool:
    """Whether a live host process runs with this real uid (a runner that predates the locks)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            return True
                        break
        except (OSError, ValueError, IndexError):
            continue
    return False


def uid_has_account(uid: int) -> bool:
    """Whether /etc/passwd names this uid: a real account is never a sandbox uid."""
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@dataclass
class UidClaim:
    """The uids this process holds, one lock file each; `release` (or exit) gives them back."""

    uids: list[int]
    lock_dir: Path
    _locks: list[IO[bytes]] = field(default_factory=list, repr=False)

    def __iter__(self) -> Iterator[int]:
        return iter(self.uids)

    def __len__(self) -> int:
        return len(self.uids)

    def __getitem__(self, slot: int) -> int:
        return self.uids[slot]

    def release(self) -> None:
        """Drop every lock (closing the file releases its flock)."""
        for fh in self._locks:
            fh.close()
        self._locks.clear()


def claim_uids(count: int, first: int, size: int, lock_dir: Path | None = None) -> UidClaim:
    """Claim `count` uids in `[first, first + size)`: free of locks, accounts and live processes.

    `lock_dir` defaults to `default_lock_dir()`. Raises UidsUnavailable, naming the range and
    the lock directory, when fewer are free, or when the lock directory cannot be written
    (naming its owner and RUNNER_UID_LOCK_DIR).
    """
    if count < 1 or size < count:
        raise ValueError(f"cannot claim {count} uids from a range of {size}")
    if first <= 0:
        raise ValueError("slot uids must be above 0: root is never a sandbox uid")
    lock_dir = default_lock_dir() if lock_dir is None else lock_dir
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(lock_dir, os.W_OK | os.X_OK):
            raise PermissionError(f"{lock_dir} is not writable")
    except PermissionError:
        raise UidsUnavailable(lock_dir_refusal(lock_dir)) from None
    claim = UidClaim(uids=[], lock_dir=lock_dir)
    skipped: dict[str, int] = {"claimed by another runner": 0, "an account": 0, "in use": 0}
    for uid in range(first, first + size):
        if len(claim.uids) == count:
            break
        fh = open(lock_dir / f"{uid}.lock", "ab")  # held (locked) for the life of the claim
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            skipped["claimed by another runner"] += 1
            continue
        # Checked under the lock, so two runners never both judge the same uid free.
        reason = "an account" if uid_has_account(uid) else "in use" if uid_in_use(uid) else None
        if reason is not None:
            fh.close()
            skipped[reason] += 1
            continue
        claim.uids.append(uid)
        claim._locks.append(fh)
    if len(claim.uids) < count:
        claim.release()
        why = ", ".join(f"{n} {what}" for what, n in skipped.items() if n)
        raise UidsUnavailable(
            f"need {count} free slot uids in {first}..{first + size - 1}, found fewer ({why}); "
            f"another runner holds them (locks in {lock_dir}) — stop it, lower the slots, "
            "or give this runner another range (RUNNER_UID_BASE, RUNNER_UID_RANGE)"
        )
    return claim


def lock_dir_refusal(lock_dir: Path) -> str:
    """Why uids cannot be claimed in `lock_dir`: who owns it and what to set instead."""
    try:
        owner = pwd.getpwuid(lock_dir.stat().st_uid).pw_name
    except (OSError, KeyError):
        owner = "another user"
    return (
        f"cannot write the uid locks in {lock_dir} (it belongs to {owner}, this process runs "
        f"as uid {os.geteuid()}): set RUNNER_UID_LOCK_DIR to a directory of your own"
    )
