"""`make run` once per checkout (issue 22): a second one refuses, naming the first's pid and
URLs, and nothing a stopped or killed run leaves (lock, URL file, credentials) breaks the next.

Before, a second `make run` started a second nats-server on the same JetStream store and the
same SQLite files, and overwrote `.data/nats-url`, which then sent `make poll-demo` to a bus
that was gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from quiz_testkit.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import runinfo  # noqa: E402  (scripts/ is not a package)


def make(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUIZ_DATA_DIR": str(data)}
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def all_ready(urls: dict[str, str]) -> bool:
    with httpx.Client(timeout=10) as http:
        return all(http.get(f"{u}/readyz").status_code == 200 for u in urls.values())


def test_a_second_make_run_refuses_and_a_killed_one_leaves_nothing_in_the_way(
    tmp_path: Path,
) -> None:
    first = System(tmp_path, None)
    try:
        _, urls = first.wait_table()
        log = first.log.read_text()
        # No key in the tests' environment: the line says so (only then, see the docs test).
        assert "Without ANTHROPIC_API_KEY the gateway answers llm_not_configured." in log
        assert make(tmp_path, "url", "S=poll").stdout.strip() == urls["poll"]

        second = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "devrun.py")],
            cwd=ROOT,
            env={**os.environ, "QUIZ_DATA_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1, second
        said = second.stderr
        assert "make run is already running" in said, said
        assert f"pid {first.proc.pid}" in said and f"kill {first.proc.pid}" in said, said
        for url in urls.values():
            assert url in said, said
        # It started nothing, and the first one is untouched.
        assert second.stdout == "", second.stdout  # no child's prefixed log line
        assert all_ready(urls)
        assert make(tmp_path, "url", "S=poll").stdout.strip() == urls["poll"]

        # Killed the hard way: its children get SIGTERM (PDEATHSIG) and are still stopping.
        children = first.descendants()
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait()
        gone = make(tmp_path, "url", "S=poll")
        assert gone.returncode != 0 and "is gone" in gone.stderr, gone
    finally:
        first.kill()

    # The next run waits for those children, takes the lock, the store and the files again.
    third = System(tmp_path, None)
    try:
        _, urls3 = third.wait_table()
        assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in children)
        assert all_ready(urls3)
        assert make(tmp_path, "url", "S=poll").stdout.strip() == urls3["poll"]
        # poll-demo finds this run's bus and poll (not a stale file's), as the platform user.
        demo = make(tmp_path, "poll-demo", "ARGS=--participants 1")
        assert demo.returncode == 0, demo
        assert f"board:     {urls3['poll']}/poll/" in demo.stdout, demo.stdout
        third.interrupt()
    finally:
        third.kill()
    # Stopped cleanly: no URL file, a free lock, and the tools say no run is there.
    assert not (tmp_path / "urls").exists()
    lock = runinfo.Lock(tmp_path)
    assert lock.acquire() and lock.previous_pids() == []
    os.close(lock.fd)
    after = make(tmp_path, "url", "S=poll")
    assert after.returncode != 0 and "no `make run` is running here" in after.stderr, after
    demo = make(tmp_path, "poll-demo")
    assert demo.returncode != 0 and "start `make run` first" in demo.stdout, demo
