"""`make run` from a fresh clone, as a normal user with the system's Python and no uv (issue 22).

What a new user of Debian 12 / Ubuntu ≥ 23.04 does first: clone, `make run`. Their Python is
externally managed (PEP 668): `pip install uv`, even `--user`, is refused, so the Makefile must
bootstrap uv elsewhere (scripts/bootstrap-uv.sh: a private venv under .data/tools). CI runs as
root, so the test creates a throwaway user, clones this checkout's tree for it (uncommitted
changes included: the tree under test, not the last commit), and runs `make run` as that user
with a PATH that holds no uv, an empty home (no uv cache: every package is fetched as for a new
user) and only the machine's network settings (its CA bundle) from our environment. It waits
for the six services, asks each `/readyz`, then stops `make run` with Ctrl-C, kills whatever
of that user would be left (by pid) and deletes the user.

Run as a normal user already, it runs as that user in a fresh clone the same way.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from quiz_contracts.subjects import SERVICE_NAMES

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The machine's own network set-up (a TLS-intercepting proxy's CA bundle here), which a user of
# this machine would have too; nothing of ours (no uv, no venv, no PYTHON*).
NETWORK_ENV = re.compile(r"(?i)^(.*_proxy|ssl_cert_(file|dir)|requests_ca_bundle|curl_ca_bundle)$")


@dataclass
class User:
    name: str
    uid: int
    gid: int
    home: Path
    created: bool


def fresh_clone(dest: Path) -> None:
    """`git clone` of this checkout, then its working tree's changes on top (modified, new and
    deleted files), so the clone is the tree under test."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True)

    def listed(*flags: str) -> list[str]:
        out = subprocess.run(
            ["git", "ls-files", "-z", *flags], cwd=ROOT, capture_output=True, check=True
        ).stdout
        return [p for p in out.decode().split("\0") if p]

    for rel in listed("--deleted"):
        (dest / rel).unlink(missing_ok=True)
    deleted = set(listed("--deleted"))
    for rel in listed("--modified", "--others", "--exclude-standard"):
        if rel in deleted:
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)


@pytest.fixture
def normal_user() -> Iterator[User]:
    """A user that is not root, with an empty home: created (and deleted after) when we are
    root, else ourselves."""
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        home = Path(tempfile.mkdtemp(prefix="quiz-fresh-home-"))
        yield User(me.pw_name, me.pw_uid, me.pw_gid, home, created=False)
        shutil.rmtree(home, ignore_errors=True)
        return
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("creating a normal user needs useradd and userdel (passwd package)")
    base = Path(tempfile.mkdtemp(prefix="quiz-fresh-"))
    base.chmod(0o755)
    name = f"quizfresh{secrets.token_hex(3)}"
    home = base / "home"
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
         "--user-group", name],
        check=True, capture_output=True,
    )  # fmt: skip
    entry = pwd.getpwnam(name)
    user = User(name, entry.pw_uid, entry.pw_gid, home, created=True)
    try:
        yield user
    finally:
        kill_processes_of(user.uid)
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def processes_of(uid: int) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["uids", "status"])
        if p.info["uids"] and p.info["uids"].real == uid
        and p.info["status"] != psutil.STATUS_ZOMBIE
    ]  # fmt: skip


def kill_processes_of(uid: int) -> list[str]:
    """SIGKILL every process of `uid` (a user this test created); their command lines."""
    left = []
    for p in processes_of(uid):
        try:
            left.append(" ".join(p.cmdline()))
            p.kill()
        except psutil.Error:
            pass
    return left


def test_make_run_from_a_fresh_clone_as_a_normal_user_without_uv(normal_user: User) -> None:
    user = normal_user
    if uv := shutil.which("uv", path=SYSTEM_PATH):
        pytest.skip(f"uv is installed system-wide ({uv}): no PATH without uv to test with")
    try:
        urllib.request.urlopen("https://pypi.org/simple/uv/", timeout=20).close()
    except OSError as e:
        pytest.skip(f"PyPI is out of reach ({e}): a fresh clone can install nothing")
    clone = user.home / "quiz"
    fresh_clone(clone)
    if user.created:
        subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.home)], check=True)
    env = {k: v for k, v in os.environ.items() if NETWORK_ENV.match(k)}
    env |= {
        "HOME": str(user.home),
        "USER": user.name,
        "LOGNAME": user.name,
        "PATH": SYSTEM_PATH,
        "LANG": "C.UTF-8",
    }
    log = user.home / "make-run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **({"user": user.uid, "group": user.gid, "extra_groups": []} if user.created else {}),
        )
    try:
        urls = wait_for_table(proc, log, timeout_s=900)
        text = log.read_text(errors="replace")
        assert "externally-managed-environment" not in text, text[-3000:]
        assert (clone / ".data" / "tools" / "bin" / "uv").exists(), text[:3000]
        assert sorted(urls) == sorted(SERVICE_NAMES)
        with httpx.Client(timeout=10) as http:
            for name, url in urls.items():
                r = http.get(f"{url}/readyz")
                assert r.status_code == 200, (name, r.text)
        # The runner runs rootless for a normal user, and says so.
        isolation = httpx.get(f"{urls['runner']}/readyz", timeout=10).json()["details"]
        assert isolation["isolation"]["mode"] == "rootless", isolation
        # `make -s url` as that user prints what the table said.
        printed = subprocess.run(
            ["make", "-s", "url", "S=editor-assist"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            **({"user": user.uid, "group": user.gid, "extra_groups": []} if user.created else {}),
        )
        assert printed.stdout.strip() == urls["editor-assist"], printed
    finally:
        with_ctrl_c(proc)
    if user.created:
        # make returns at once on Ctrl-C; `make run` stops its services in order after it.
        deadline = time.monotonic() + 40
        while processes_of(user.uid) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = kill_processes_of(user.uid)
        assert left == [], f"left running 40 s after Ctrl-C: {left}"


def wait_for_table(proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "Ctrl-C stops everything" in text:
            rows = re.findall(r"^  ([a-z-]+)\s+(http://\S+)\s+(yes|NO)\b", text, re.M)
            assert rows and all(r[2] == "yes" for r in rows), text[-4000:]
            return {r[0]: r[1] for r in rows}
        if proc.poll() is not None:
            pytest.fail(f"make run exited ({proc.returncode}):\n{text[-6000:]}")
        time.sleep(1)
    pytest.fail(f"make run did not come up in {timeout_s} s:\n{log.read_text()[-6000:]}")


def with_ctrl_c(proc: subprocess.Popen[bytes]) -> None:
    """What a terminal's Ctrl-C does: SIGINT to the foreground process group (make and all)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
