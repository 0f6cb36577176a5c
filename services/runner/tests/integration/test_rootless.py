"""Without root (issue 11, item 9): the runner starts as a normal user, with one uid for every
slot and unprivileged user namespaces, and says in /readyz what isolation is weaker.

Run here as `nobody`, with the system's Python 3.11 over this checkout's venv (the venv's own
interpreter lives under /root, which nobody may not enter).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.runner import RunCase, RunFile, RunReply, RunRequest
from quiz_runner.service import CASE_TMPFS_INODES
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
SITE_PACKAGES = sysconfig.get_paths()["purelib"]
PROBE = "import site, sys; site.addsitedir(sys.argv[1]); import quiz_runner.main"
BOOT = (
    "import site, sys, runpy; site.addsitedir(sys.argv[1]); del sys.argv[1]; "
    "runpy.run_module('quiz_runner.main', run_name='__main__')"
)


def as_nobody(argv: list[str]) -> list[str]:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("becoming another user needs root and setpriv (util-linux)")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} to run the runner as nobody")
    probe = subprocess.run(
        as_nobody([SYSTEM_PYTHON, "-c", PROBE, SITE_PACKAGES]), capture_output=True, text=True
    )
    if probe.returncode != 0:
        # Only a checkout nobody may not read (under a 0700 home) is a reason not to run.
        if "Permission denied" not in probe.stderr and "PermissionError" not in probe.stderr:
            pytest.fail(f"the runner does not load as nobody:\n{probe.stderr}")
        pytest.skip(f"nobody may not read this checkout: {probe.stderr[-300:]}")
    root = Path(tempfile.mkdtemp(prefix="quiz-runner-nobody-"))
    os.chown(root, NOBODY, NOBODY)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_the_runner_starts_and_runs_without_root(
    nobody_dir: Path, nats_url: str, nc: NATS, signing_keys: SigningKeys
) -> None:
    jwks = nobody_dir / "jwks.json"
    shutil.copy(signing_keys.jwks_path, jwks)
    os.chown(jwks, NOBODY, NOBODY)
    port = free_port()
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(nobody_dir),
        "NATS_URL": nats_url,
        "JWKS_FILE": str(jwks),
        "HTTP_HOST": "127.0.0.1",
        "HTTP_PORT": str(port),
        "RUNNER_STATE_DIR": str(nobody_dir / "state"),
        "RUNNER_SLOTS": "2",
        "PYTHONUNBUFFERED": "1",
    }
    log = nobody_dir / "runner.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            as_nobody([SYSTEM_PYTHON, "-c", BOOT, SITE_PACKAGES]),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(600):
                if proc.poll() is not None:
                    pytest.fail(f"the runner exited ({proc.returncode}):\n{log.read_text()}")
                try:
                    ready = await http.get("/readyz")
                    if ready.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                pytest.fail(f"the runner never became ready:\n{log.read_text()}")
        isolation = ready.json()["details"]["isolation"]
        assert isolation["mode"] == "rootless" and isolation["uids"] == [NOBODY]
        assert "uid" in isolation["weaker"] and "signal" in isolation["weaker"]

        # Two slots at once, both as nobody: each sandbox has its own namespaces and limits.
        src = (
            "import errno, os, sys\n"
            "made = 0\n"
            "try:\n"
            "    while made < 100000:\n"
            "        open(f'/tmp/f{made}', 'w').close(); made += 1\n"
            "except OSError as e:\n"
            "    print(os.getuid(), sys.stdin.read(), made, errno.errorcode[e.errno])\n"
        )
        req = RunRequest(
            language="python",
            files=[RunFile(path="main.py", content=src)],
            cases=[RunCase(name="a", stdin="first"), RunCase(name="b", stdin="second")],
        )
        replies = await asyncio.gather(
            *(request(nc, subjects.RUNNER_RUN, req, RunReply, timeout=120) for _ in range(2))
        )
        for reply in replies:
            outs = [c.stdout.split() for c in reply.cases]
            assert [o[:2] for o in outs] == [["1000", "first"], ["1000", "second"]], reply
            assert all(int(o[2]) < CASE_TMPFS_INODES and o[3] == "ENOSPC" for o in outs)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "not root" in log.read_text()
