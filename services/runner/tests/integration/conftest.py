"""Fixtures of the runner's integration tests: a RunnerService per sandbox backend."""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quiz_runner.sandbox.base import Sandbox, ensure_init
from quiz_runner.sandbox.bwrap import BwrapSandbox
from quiz_runner.service import RunnerService
from quiz_runner.slots import Slots

# Slot uids of the tests: apart from a runner that may run on the same host (61000+), and one
# block of TEST_SLOTS per test session, claimed by a lock, so that two sessions at once (a
# developer and CI, or the whole-repo run beside this one) never sweep each other's sandboxes.
TEST_UID_FIRST = 62000
TEST_SLOTS = 2
TEST_ROOT = Path("/var/lib/quiz-runner-test")


def uid_processes(uids: range) -> list[tuple[int, int, str]]:
    """(pid, uid, cmdline) of every live (not zombie) host process whose real uid is in `uids`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                fields = dict(line.split(b":", 1) for line in fh if b":" in line)
            uid = int(fields[b"Uid"].split()[0])
            if fields[b"State"].strip().startswith(b"Z"):
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, KeyError, ValueError):
            continue
        if uid in uids:
            found.append((int(entry.name), uid, cmd))
    return found


@pytest.fixture(scope="session")
def test_uid_base() -> Iterator[int]:
    """First slot uid of this session: a free block, held by an exclusive lock for the session."""
    TEST_ROOT.mkdir(parents=True, exist_ok=True)
    for block in range(256):
        base = TEST_UID_FIRST + block * TEST_SLOTS
        lock = open(TEST_ROOT / f"uids-{base}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        try:
            yield base
        finally:
            lock.close()
        return
    raise RuntimeError("no free block of test uids")


@pytest.fixture(scope="session")
def state_dir() -> Iterator[Path]:
    """A state dir the slot uids can traverse (pytest's tmp dirs are 0700 root)."""
    root = TEST_ROOT / uuid.uuid4().hex[:12]
    root.mkdir(parents=True)
    os.chmod(TEST_ROOT, 0o711)  # noqa: S103 - traversal only, for the slot uids
    os.chmod(root, 0o711)  # noqa: S103
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def init_path(state_dir: Path) -> Path:
    return ensure_init(state_dir)


@pytest.fixture(scope="session")
def docker_sandbox(init_path: Path) -> Sandbox:
    """The docker backend on a real engine, started here if installed; skip only if none."""
    from quiz_runner.sandbox import docker as docker_backend

    try:
        client = docker_backend.connect_or_start()
    except docker_backend.EngineUnavailable as exc:
        pytest.skip(f"no Docker engine can be started: {exc}")
    image = docker_backend.ensure_image(client, init_path)
    return docker_backend.DockerSandbox(client, image)


@pytest.fixture(scope="session", params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest, init_path: Path) -> Sandbox:
    """Each sandbox backend in turn."""
    if request.param == "bwrap":
        return BwrapSandbox(init_path)
    sandbox: Sandbox = request.getfixturevalue("docker_sandbox")
    return sandbox


@pytest.fixture(scope="session")
def runner(backend: Sandbox, state_dir: Path, test_uid_base: int) -> RunnerService:
    """A RunnerService over the backend with this session's slot uids."""
    return RunnerService(
        backend,
        Slots(TEST_SLOTS, retry_after_s=0.5),
        state_dir,
        uid_base=test_uid_base,
    )


@pytest.fixture
def no_leftovers(test_uid_base: int) -> Iterator[None]:
    """Assert that no process of this session's slot uids outlives the test."""
    yield
    left = uid_processes(range(test_uid_base, test_uid_base + TEST_SLOTS))
    assert left == [], f"processes left running: {left}"
