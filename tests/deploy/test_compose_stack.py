"""`make test-deploy`: the compose stack built, started, driven through its nginx gateway, stopped.

The images are built by scripts/build-images.sh (a Debian base from debootstrap when no base is
given: no registry image is pulled), the stack is started with Debian's `docker-compose` on the
host network (docker-compose.yml says why), the test kit's Anthropic stub stands in for the
provider (ANTHROPIC_BASE_URL), and then: one wand call, one review request and one poll answer
through nginx on :8080. Afterwards `docker-compose down -v` must leave no container, volume or
listening port behind.

Runs where a Docker engine answers or can be started (root, `dockerd` installed: it is started
with `--iptables=false --bridge=none` and stopped again); skips with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import free_port, nats_connect

pytestmark = [pytest.mark.docker, pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "quiz-deploy-test"
GATEWAY = "http://127.0.0.1:8080"
# The host ports docker-compose.yml fixes (host network).
PORTS = (8080, 14222, 18222, 15432, 18101, 18102, 18103, 18104, 18105, 18106)
SERVICE_PORTS = {"review": 18104, "poll": 18105}
MCQ_DRAFT = {
    "configVersion": 2,
    "prompt": "2 + 2 ?",
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
    "choices": [{"text": "", "correct": True}, {"text": "", "correct": False}],
}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    """A Docker engine on the default socket: the one running, or one started here."""
    if shutil.which("docker") is None:
        pytest.skip("no docker client (apt-get install docker.io)")
    if shutil.which("docker-compose") is None:
        pytest.skip("no docker-compose (apt-get install docker-compose)")
    if _docker_answers():
        yield
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        pytest.skip("no Docker engine answers and none can be started here (needs root, dockerd)")
    (ROOT / ".data").mkdir(exist_ok=True)
    log = (ROOT / ".data" / "dockerd.log").open("ab")  # under .data: make clean takes it
    proc = subprocess.Popen(
        [dockerd, "--iptables=false", "--bridge=none"],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not _docker_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip(f"dockerd could not be started (exit {proc.poll()}), see {log.name}")
        time.sleep(0.5)
    yield
    proc.terminate()
    proc.wait(30)


def _compose_files() -> list[str]:
    """docker-compose.yml, and the runner's sandbox override for this docker-compose."""
    version = subprocess.run(
        ["docker-compose", "version", "--short"], capture_output=True, text=True
    ).stdout.strip()
    override = (
        "deploy/compose/runner-proc-v1.yml"
        if version.startswith("1.")
        else "deploy/compose/runner-sandbox.yml"
    )
    return ["-f", "docker-compose.yml", "-f", override]


def _compose(*args: str, env: dict[str, str], timeout: float = 600, check: bool = True) -> str:
    done = subprocess.run(
        [
            "docker-compose",
            *("-p", PROJECT, "--env-file", ".data/compose.env"),
            *_compose_files(),
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and done.returncode != 0:
        ps = _compose("ps", env=env, check=False)
        logs = _compose("logs", "--tail", "25", env=env, check=False)
        pytest.fail(
            f"docker-compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}\n{ps}\n{logs[-8000:]}"
        )
    return done.stdout + done.stderr


def _leftovers() -> list[str]:
    label = f"label=com.docker.compose.project={PROJECT}"
    found = []
    for kind in (["ps", "-a"], ["volume", "ls"], ["network", "ls"]):
        out = subprocess.run(
            ["docker", *kind, "-q", "--filter", label], capture_output=True, text=True
        ).stdout.split()
        found += [f"{kind[0]} {x}" for x in out]
    return found + [f"port {p}" for p in PORTS if _listening(p)]


@pytest.fixture(scope="module")
def stack(engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SigningKeys]:
    """The stack up and ready behind nginx; down, and nothing left, afterwards."""
    busy = [p for p in PORTS if _listening(p)]
    assert not busy, f"ports the stack needs are taken on this host: {busy}"
    start = time.monotonic()
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-images.sh")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    print(f"\n{build.stdout}images: {time.monotonic() - start:.0f} s", file=sys.stderr)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "compose_env.py")], cwd=ROOT, check=True)
    keys = SigningKeys.load_or_create(ROOT / ".data" / "dev-keys")
    stub_port = free_port()
    stub_log = (tmp_path_factory.mktemp("stub") / "stub.log").open("wb")
    stub = subprocess.Popen(
        [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(stub_port)],
        stdout=stub_log,
        stderr=stub_log,
    )
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "stub",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{stub_port}",
        "COMPOSE_INTERACTIVE_NO_CLI": "1",
    }
    try:
        up = time.monotonic()
        # Healthy in dependency order: nginx starts once every service is ready.
        _compose("up", "-d", "--no-build", env=env)
        deadline = time.monotonic() + 240
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{GATEWAY}/healthz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                ps = _compose("ps", env=env)
                logs = _compose("logs", "--tail", "30", env=env)
                pytest.fail(f"the stack was not ready in 240 s:\n{ps}\n{logs[-6000:]}")
            time.sleep(1)
        print(f"stack ready in {time.monotonic() - up:.0f} s", file=sys.stderr)
        yield keys
    finally:
        _compose("down", "-v", "--remove-orphans", "-t", "20", env=env)
        stub.terminate()
        stub.wait(10)
        deadline = time.monotonic() + 20
        while (left := _leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"docker-compose down left: {left}"


def _headers(keys: SigningKeys, sub: str, grants: dict[str, dict[str, object]]) -> dict[str, str]:
    return {"authorization": f"Bearer {keys.mint(sub, grants)}"}


def _has_route(service: str, path: str) -> bool:
    """The service (directly, not through nginx) documents `path` in its OpenAPI."""
    spec = httpx.get(f"http://127.0.0.1:{SERVICE_PORTS[service]}/openapi.json", timeout=5).json()
    return path in spec.get("paths", {})


def test_a_wand_call_through_nginx(stack: SigningKeys) -> None:
    grants = {"question:42": {"role": "contributor", "type": "mcq", "pool": "7"}}
    r = httpx.post(
        f"{GATEWAY}/app/api/questions/42/generate",
        headers=_headers(stack, "teacher-1", grants),
        json={"config": MCQ_DRAFT, "explanation": ""},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    # The stub's proposal merged into the draft: the choices have text now.
    assert all(c["text"] for c in body["config"]["choices"]), body
    # Without a grant the route does not exist for you (nginx passes the service's 404 on).
    r = httpx.post(
        f"{GATEWAY}/app/api/questions/43/generate",
        headers=_headers(stack, "teacher-1", grants),
        json={"config": MCQ_DRAFT, "explanation": ""},
        timeout=30,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_a_review_request_through_nginx(stack: SigningKeys) -> None:
    if not _has_route("review", "/app/api/pools/{pool_id}/reviews"):
        pytest.skip("review's HTTP routes are not on this branch yet (the review issue adds them)")
    r = httpx.get(
        f"{GATEWAY}/app/api/pools/7/reviews",
        headers=_headers(stack, "teacher-1", {"pool:7": {"role": "viewer"}}),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert isinstance(r.json(), dict)


async def test_a_poll_answer_through_nginx(stack: SigningKeys) -> None:
    if not _has_route("poll", "/app/api/evaluations/{evaluationId}/poll/answer"):
        pytest.skip("poll's HTTP routes are not on this branch yet (the poll issue adds them)")
    # The platform opens the poll over the locked bus, as the `platform` user.
    password = (ROOT / ".data" / "compose-nats-credentials" / "platform.password").read_text()
    nc = await nats_connect(f"nats://platform:{password.strip()}@127.0.0.1:14222")
    try:
        opened = {
            "evaluationId": "deploytest1",
            "teacherId": "teacher-1",
            "audience": {"kind": "anonymous"},
            "question": {"prompt": "How could the campus use less energy?", "maxIdeas": 3},
            "openedAt": "2026-11-30T18:00:00Z",
        }
        reply = await nc.request("poll.v1.open", json.dumps(opened).encode(), timeout=10)
        assert json.loads(reply.data).get("ok") is True, reply.data
    finally:
        await nc.close()
    grant = {"evaluation:deploytest1": {"role": "viewer", "attempt": "attempt-1", "guest": True}}
    r = httpx.post(
        f"{GATEWAY}/app/api/evaluations/deploytest1/poll/answer",
        headers=_headers(stack, "guest-1", grant),
        json={"ideas": ["switch off the lights"]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.json()["ideas"] == ["switch off the lights"]
