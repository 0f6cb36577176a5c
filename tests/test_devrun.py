"""`make run`'s own words (scripts/devrun.py, issue 34): who holds a port, what a new run waits for.

Before, a port another user held moved "in use by a process not visible to us", and a run after
a killed one waited up to 20 s for its children without a word.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import devrun  # noqa: E402  (scripts/ is not a package)

NOBODY = 65534


def test_a_port_another_user_holds_is_said_in_words_with_how_to_find_who() -> None:
    """`make run` as a normal user, a port taken by root's program: psutil cannot see whose."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("holding a port as another user than the one asking needs root and setpriv")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        site = sysconfig.get_paths()["purelib"]
        code = (
            f"import site, sys; site.addsitedir({site!r}); sys.path.insert(0, {str(ROOT)!r} "
            f"+ '/scripts'); import devrun; print(devrun.choose_port({port})[1])"
        )
        argv = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        done = subprocess.run(
            [*argv, "/usr/bin/python3", "-c", code],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=60,
        )
    if done.returncode != 0 and "Permission" in done.stderr:
        pytest.skip(f"nobody may not read this checkout: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said.startswith(f"{port} is in use by a program of another user"), said
    assert f"sudo ss -ltnp 'sport = :{port}'" in said, said
    assert "not visible to us" not in said


def test_what_a_new_run_waits_for_is_said() -> None:
    """A process of the previous run still stopping: the wait is announced, with its pids."""
    leftover = subprocess.Popen(["sleep", "60"])
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        leftover.send_signal(signal.SIGTERM)  # it stops once we are told: the wait ends

    try:
        assert devrun.wait_for_leftovers([leftover.pid], say=say) == []
    finally:
        leftover.kill()
        leftover.wait()
    assert said == [
        "Waiting (up to 20 s) for 1 process of the previous `make run` to stop: "
        f"pids {leftover.pid}…"
    ]
    # Nothing left: nothing said.
    assert devrun.wait_for_leftovers([leftover.pid], say=said.append) == [] and len(said) == 1


def test_a_refused_configuration_is_the_why_of_the_failure_report() -> None:
    said = "quiz-llm-gateway: refused to start: no price for model(s) x: set MODEL_PRICES"
    report = devrun.failure_report("llm-gateway", 2, ["starting", said], started=False)
    assert f"Why: {said}" in report
    assert "at start-up (exit code 2)" in report
