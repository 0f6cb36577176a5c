"""Fixtures of the runner's integration tests: a RunnerService per sandbox backend."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from quiz_runner.sandbox.base import Sandbox, ensure_init
from quiz_runner.sandbox.bwrap import BwrapSandbox
from quiz_runner.service import RunnerService
from quiz_runner.slots import Slots
from quiz_runner.uids import UidClaim, claim_uids

# Slot uids of the tests: claimed host-wide like a runner's (quiz_runner.uids), from a range of
# their own, so two sessions at once (a developer and CI, or `make run` beside the suite) never
# sweep each other's sandboxes.
TEST_UID_FIRST = 62000
TEST_UID_RANGE = 1000
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


# Without root the runner runs every slot as its own user (quiz_runner.main, "rootless"), and so
# do these tests: `make test` as a normal user (issue 34 item 8).
ROOTLESS = os.geteuid() != 0


@pytest.fixture(scope="session")
def test_uids() -> Iterator[UidClaim]:
    """This session's slot uids, claimed like a runner claims them, held for the session;
    without root, the user's own uid for every slot (nothing to claim, as the runner does)."""
    if ROOTLESS:
        yield UidClaim(uids=[os.geteuid()] * TEST_SLOTS, lock_dir=Path("/nonexistent"))
        return
    claim = claim_uids(TEST_SLOTS, TEST_UID_FIRST, TEST_UID_RANGE)
    try:
        yield claim
    finally:
        claim.release()


@pytest.fixture(scope="session")
def test_uid_range() -> dict[str, int]:
    """Settings fields that make a runner started by a test claim from the tests' range."""
    return {"uid_base": TEST_UID_FIRST, "uid_range": TEST_UID_RANGE}


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state dir the slot uids can traverse (pytest's tmp dirs are 0700 root); without root
    the sandboxes run as us, and a tmp dir of ours does."""
    if ROOTLESS:
        yield tmp_path_factory.mktemp("runner-state")
        return
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
def docker_sandbox(init_path: Path, state_dir: Path) -> Sandbox:
    """The docker backend on a real engine, started here if installed; skip only if none."""
    from quiz_runner.sandbox import docker as docker_backend

    try:
        client = docker_backend.connect_or_start()
    except docker_backend.EngineUnavailable as exc:
        pytest.skip(f"no Docker engine can be started: {exc}")
    image = docker_backend.ensure_image(client, init_path)
    return docker_backend.DockerSandbox(client, image, state_dir)


@pytest.fixture(scope="session", params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest, init_path: Path) -> Sandbox:
    """Each sandbox backend in turn."""
    if request.param == "bwrap":
        return BwrapSandbox(init_path)
    sandbox: Sandbox = request.getfixturevalue("docker_sandbox")
    return sandbox


@pytest.fixture(scope="session")
def runner(backend: Sandbox, state_dir: Path, test_uids: UidClaim) -> RunnerService:
    """A RunnerService over the backend with this session's slot uids."""
    return RunnerService(
        backend,
        Slots(TEST_SLOTS, retry_after_s=0.5),
        state_dir,
        uids=test_uids,
    )


def sandbox_processes() -> list[tuple[int, str]]:
    """(pid, cmdline) of every live process of ours under a bwrap (a sandbox's), bwrap too."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            chain = [p, *p.parents()]
            if any(q.name() == "bwrap" for q in chain):
                found.append((p.pid, " ".join(p.cmdline())))
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_leftovers(test_uids: UidClaim) -> Iterator[None]:
    """Assert that no process of this session's slot uids outlives the test (without root,
    where the slot uid is ours: no process of a sandbox)."""
    yield
    if ROOTLESS:
        assert sandbox_processes() == [], f"processes left running: {sandbox_processes()}"
        return
    left = [p for uid in test_uids for p in uid_processes(range(uid, uid + 1))]
    assert left == [], f"processes left running: {left}"
