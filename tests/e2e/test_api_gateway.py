"""A teacher's wand call as it really travels: nginx (the API gateway) → editor-assist → NATS →
llm-gateway (→ the model) and runner, every service its own process, as `make run` starts them."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from quiz_contracts.questions.code import empty_code_draft
from quiz_lesson_fix.eval.cases import load_cases
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import free_port
from quiz_testkit.system import ROOT, System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
NGINX_CONF = ROOT / "deploy" / "compose" / "nginx.conf"
ROUTED = {"editor-assist", "review", "poll", "lesson-fix"}
LESSONS_GRANT = {"lessons": {"role": "contributor"}}


def nginx_binary() -> str | None:
    return shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )


# The services' ports in docker-compose.yml (host network), which nginx.conf's upstreams name.
COMPOSE_PORTS = {"editor-assist": 18103, "review": 18104, "poll": 18105, "lesson-fix": 18106}


def local_nginx_conf(urls: dict[str, str], port: int, prefix: Path) -> str:
    """The compose API gateway's config, its upstreams pointed at the local processes."""
    conf = NGINX_CONF.read_text()
    for name in ROUTED:
        host_port = urls[name].removeprefix("http://")
        conf = conf.replace(f"server 127.0.0.1:{COMPOSE_PORTS[name]};", f"server {host_port};")
    conf = conf.replace("listen 8080;", f"listen 127.0.0.1:{port};")
    conf = conf.replace("/tmp/", f"{prefix}/")
    assert "8080" not in conf, "the listener was rewritten"
    assert not any(f":{p};" in conf for p in COMPOSE_PORTS.values()), "every upstream too"
    return conf


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    anthropic_stub_server.reset()
    return anthropic_stub_server


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, stub: AnthropicStub
) -> Iterator[tuple[str, SigningKeys]]:
    nginx = nginx_binary()
    if nginx is None:
        pytest.skip("nginx is not installed (scripts/ensure-test-tools.sh installs it as root)")
    data = tmp_path_factory.mktemp("platform")
    system = System(
        data, None, {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": stub.base_url}
    )
    proxy: subprocess.Popen[bytes] | None = None
    try:
        _, urls = system.wait_table()
        port = free_port()
        conf = data / "nginx.conf"
        conf.write_text(local_nginx_conf(urls, port, data))
        proxy = subprocess.Popen(
            [nginx, "-p", str(data), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(data / "nginx.log").open("wb"),
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{base}/nothing", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proxy.poll() is not None:
                    pytest.fail(f"nginx did not start: {(data / 'nginx.log').read_text()}")
                time.sleep(0.1)
        # The dev key `make run` created is the one the services trust.
        yield base, SigningKeys.load_or_create(data / "dev-keys")
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        if system.proc.poll() is None:
            system.interrupt()
        system.kill()


def test_code_question_generated_and_settled_through_the_api_gateway(
    platform: tuple[str, SigningKeys], stub: AnthropicStub
) -> None:
    base, keys = platform
    token = keys.mint("teacher-e2e", {"question:42": {"role": "contributor", "type": "code"}})
    cases = [
        {"name": "three", "stdin": "3\n", "args": [], "visible": True},
        {"name": "ten", "stdin": "10\n", "args": [], "visible": False},
    ]
    stub.script(
        StubReply.tool(
            {
                "proposal": {
                    "referenceSolution": "n = int(input())\nprint(n * n)\n",
                    "cases": cases,
                },
                "explanation": "Square the number read.",
            }
        )
    )
    # A fresh code draft in the platform's shape (emptyCodeConfig), with a statement.
    draft = {
        **empty_code_draft(),
        "prompt": "Read n and print n squared.",
        "language": "python",
    }
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = httpx.post(
        f"{base}/app/api/questions/42/generate",
        json={"config": draft, "explanation": ""},
        headers={"authorization": f"Bearer {token}", "traceparent": traceparent},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    outputs = {c["name"]: c["expected"] for c in body["config"]["tests"]["cases"]}
    assert outputs == {"three": "9\n", "ten": "100\n"}
    assert body["explanation"] == "Square the number read."
    assert body["incomplete"] is None
    # The model saw the draft as data, and nothing but the draft: no name, no token.
    sent = stub.requests[-1]
    assert "teacher-e2e" not in str(sent.body)
    # The default model (claude-sonnet-5-5) refuses a forced tool: the schema goes as
    # output_config.format.
    assert "tool_choice" not in sent.body
    assert sent.body["output_config"]["format"]["type"] == "json_schema"


def test_access_is_checked_behind_the_gateway(platform: tuple[str, SigningKeys]) -> None:
    base, keys = platform
    outsider = keys.mint("teacher-x", {"question:7": {"role": "contributor", "type": "mcq"}})
    r = httpx.post(
        f"{base}/app/api/questions/42/generate",
        json={"config": {"prompt": "x"}},
        headers={"authorization": f"Bearer {outsider}"},
        timeout=30,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = httpx.get(f"{base}/app/api/generate/availability", timeout=30)
    assert r.status_code == 401
    r = httpx.get(
        f"{base}/app/api/generate/availability",
        headers={"authorization": f"Bearer {outsider}"},
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["available"] is True
    # Internal routes are not published by the gateway.
    assert httpx.get(f"{base}/metrics", timeout=10).status_code == 404
    assert re.search(r"json", httpx.get(f"{base}/metrics", timeout=10).headers["content-type"])


def test_a_lesson_fix_through_the_api_gateway(
    platform: tuple[str, SigningKeys], stub: AnthropicStub
) -> None:
    base, keys = platform
    author = {"authorization": f"Bearer {keys.mint('author-e2e', LESSONS_GRANT)}"}
    case = next(c for c in load_cases() if c.name == "fr_grounding_single")
    r = httpx.post(
        f"{base}/app/api/lessons/check", json={"lesson": case.lesson}, headers=author, timeout=60
    )
    assert r.status_code == 200, r.text
    (finding,) = r.json()["errors"]
    # `make run` has no siteverify secret: lesson-fix runs with verification off, and says so.
    stub.script(StubReply.tool(case.reference_reply()))
    body = {"lesson": case.lesson, "key": finding["key"], "verification": ""}
    r = httpx.post(f"{base}/app/api/lessons/fix", json=body, headers=author, timeout=120)
    assert r.status_code == 200, r.text
    assert {op["blockId"] for op in r.json()["operations"]} == {"s1q2", "s1q4"}
    # Past the gateway's own maximum for lessons: refused there, in the services' error shape.
    r = httpx.post(
        f"{base}/app/api/lessons/fix",
        content=b" " * 2_200_000,  # over the 2m of nginx.conf for lessons
        headers={**author, "content-type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"


def test_the_poll_pages_behind_the_gateway(platform: tuple[str, SigningKeys]) -> None:
    """The wall, board and participant page and their assets reach the poll service (issue 16);
    the shells are public, their data is not."""
    base, keys = platform
    for page in ("wall", "moderate", "answer"):
        r = httpx.get(f"{base}/poll/ev-gw/{page}", timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), page
        assert "script-src 'self'" in r.headers["content-security-policy"]
    r = httpx.get(f"{base}/poll/assets/wall.js", timeout=30)
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]
    outsider = keys.mint("teacher-x", {"evaluation:other": {"role": "owner"}})
    r = httpx.get(
        f"{base}/app/api/evaluations/ev-gw/poll/ideas",
        headers={"authorization": f"Bearer {outsider}"},
        timeout=30,
    )
    assert r.status_code == 404 and r.json()["code"] == "not_found"
