"""Where the running `make run` is: its URL file (`.data/urls`) and its single-instance lock.

`make run` (scripts/devrun.py) writes `.data/urls` once it has chosen its ports, one
`<name> <url>` line per service plus `nats` (without credentials) and `pid`, and removes it when
it stops; `.data/run.lock` is held (flock) for as long as it runs and names its pid and its
children's. Every tool beside it reads the file instead of assuming ports: `make -s url
S=<service>` (this module as a command), `make poll-demo`, the README's `wand`.

Standard library only: `make url` runs it with the system's python3, before any environment.

    python3 scripts/runinfo.py editor-assist         → http://127.0.0.1:8103
    python3 scripts/runinfo.py nats --as platform    → nats://platform:<password>@127.0.0.1:4222
    python3 scripts/runinfo.py                       → the whole file

Exit status 1 (and why, on stderr) when no `make run` of this data dir is running, 2 for a name
it does not know.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """`QUIZ_DATA_DIR`, default `.data` of this checkout (as `make run` and `make token`)."""
    return Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data")).resolve()


def urls_path(data: Path) -> Path:
    return data / "urls"


def lock_path(data: Path) -> Path:
    return data / "run.lock"


class NotRunning(Exception):
    """No `make run` of this data dir is running (the message says what was found)."""


@dataclass
class RunInfo:
    """What `.data/urls` holds: the pid of `make run` and `name → base URL` (nats included)."""

    pid: int
    urls: dict[str, str] = field(default_factory=dict)
    # /proc/<pid>/stat's start time: a pid reused by another process since is not "running".
    started: int | None = None

    def render(self) -> str:
        lines = [
            "# Written by `make run` once its ports are chosen, removed when it stops.",
            "# Read it with `make -s url S=<name>`; never assume a port.",
            f"pid {self.pid}:{self.started if self.started is not None else start_time(self.pid)}",
        ]
        lines += [f"{name} {url}" for name, url in self.urls.items()]
        return "\n".join(lines) + "\n"


def parse(text: str) -> RunInfo:
    pid = 0
    started: int | None = None
    urls: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, value = line.partition(" ")
        if name == "pid":
            pid_text, _, started_text = value.strip().partition(":")
            pid = int(pid_text)
            started = int(started_text) if started_text and started_text != "None" else None
        else:
            urls[name] = value.strip()
    return RunInfo(pid, urls, started)


def alive(pid: int) -> bool:
    """A process with that pid exists (of any user: a zombie-free /proc entry)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def write(data: Path, info: RunInfo) -> None:
    """Replace `.data/urls` atomically: a reader sees the old file or the new, never half."""
    tmp = urls_path(data).with_suffix(".tmp")
    tmp.write_text(info.render())
    tmp.replace(urls_path(data))


def remove(data: Path, pid: int) -> None:
    """Remove `.data/urls` if it is still this pid's (a newer run may have replaced it)."""
    try:
        if parse(urls_path(data).read_text()).pid == pid:
            urls_path(data).unlink()
    except (FileNotFoundError, ValueError):
        pass


def read(data: Path) -> RunInfo:
    """The running `make run`'s URLs; NotRunning when the file is missing or its pid is gone."""
    path = urls_path(data)
    try:
        info = parse(path.read_text())
    except FileNotFoundError:
        raise NotRunning(f"no `make run` is running here ({path} is missing)") from None
    except ValueError:
        raise NotRunning(f"{path} is not a URL file of `make run`") from None
    if not alive(info.pid) or (info.started is not None and start_time(info.pid) != info.started):
        raise NotRunning(
            f"the `make run` that wrote {path} (pid {info.pid}) is gone: start it again"
        )
    return info


class Lock:
    """The single-instance lock of a data dir: an flock on `.data/run.lock`, held while
    `make run` runs and released by the kernel however it ends (a kill -9 too)."""

    def __init__(self, data: Path) -> None:
        self.path = lock_path(data)
        self.fd = -1

    def acquire(self) -> bool:
        """True when taken; False when another `make run` holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def previous_pids(self) -> list[int]:
        """The processes the last holder wrote (itself and its children) that still run:
        each is written with its start time, so a pid reused since is not mistaken for it."""
        try:
            pairs = [item.split(":") for item in self.path.read_text().split()]
            return [int(p) for p, t in pairs if start_time(int(p)) == int(t)]
        except (OSError, ValueError):
            return []

    def record(self, pids: list[int]) -> None:
        """Write our pid and our children's (each `pid:start-time`): for the refusal message
        and for the next run, which waits for children a killed run left stopping."""
        items = [f"{p}:{t}" for p in pids if (t := start_time(p)) is not None]
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, (" ".join(items) + "\n").encode(), 0)

    def holder(self) -> int | None:
        """The pid of the `make run` holding the lock (the first pid it wrote)."""
        try:
            first = self.path.read_text().split()[0]
            return int(first.split(":")[0])
        except (OSError, ValueError, IndexError):
            return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot, /proc/<pid>/stat field 22); None
    when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def without_credentials(url: str) -> str:
    """`url` (one URL or a comma-separated list) with any `user:password@` taken out."""
    out = []
    for one in url.split(","):
        scheme, sep, rest = one.strip().partition("://")
        out.append(f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else one.rpartition("@")[2])
    return ",".join(out)


def with_credentials(url: str, user: str, data: Path) -> str:
    """`url` (one URL or a comma-separated list) as `user` of the locked bus `make run`
    started, with the password from `.data/nats-credentials/<user>.password`."""
    secret = data / "nats-credentials" / f"{user}.password"
    try:
        password = secret.read_text().strip()
    except FileNotFoundError:
        raise NotRunning(f"no password for {user!r} ({secret} is missing)") from None
    out = []
    for one in url.split(","):
        scheme, _, rest = one.partition("://")
        out.append(f"{scheme}://{user}:{password}@{rest.rpartition('@')[2]}")
    return ",".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The URLs of the running `make run`.")
    p.add_argument("name", nargs="?", help="a service, or nats; none: the whole file")
    p.add_argument("--as", dest="user", help="nats only: the URL as this user of the locked bus")
    args = p.parse_args(argv)
    data = data_dir()
    try:
        info = read(data)
        if not args.name:
            print(info.render(), end="")
            return 0
        url = info.urls.get(args.name)
        if url is None:
            known = ", ".join(info.urls)
            print(f"no URL named {args.name!r} (known: {known})", file=sys.stderr)
            return 2
        if args.user:
            if args.name != "nats":
                print("AS= (--as) is for S=nats only", file=sys.stderr)
                return 2
            url = with_credentials(url, args.user, data)
        print(url)
        return 0
    except NotRunning as e:
        print(f"{e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
