"""The alert rules fire on real faults (issue 35): a real Prometheus (Debian's package) with the
project's own rule files (deploy/monitoring/alerts.yaml, unchanged), scraping and evaluating
every 2 s, against the system as `make run` starts it; each fault is injected on loopback,
bounded in count and time, and its named alert must be firing within 3 minutes of it. First,
every family the running services' /metrics declare must be on a rule or a dashboard panel.

Phase 1 injects the faults that leave the bus up, at once: the model provider unreachable (the
gateway's provider is a closed loopback port, calls keep coming), the runner saturated (one
slot, a burst of requests every half second), a dead letter (a review request that does not
decode), an internal answer (the poll's database without its table of polls, then a poll
opened), a service frozen (SIGSTOP: it stops answering its scrapes). Phase 2 brings the
provider (the test kit's stub) up and spends the daily cap until calls are refused. Phase 3
freezes nats-server: every service loses the bus. The other rules are proven by promtool's unit
tests (deploy/monitoring/alerts-test.yaml).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply, CompleteRequest, LlmMessage, Purpose
from quiz_contracts.runner import RunCase, RunFile, RunLimits, RunReply, RunRequest
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.nats_server import free_port, nats_connect, with_credentials
from quiz_testkit.prometheus import PrometheusServer, families, prometheus_binary, uncovered
from quiz_testkit.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "monitoring" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "monitoring" / "grafana-dashboard.json"
# The bound: every fault names itself within 3 minutes.
WITHIN_S = 180.0
# The gateway's model for the wand's purpose here, priced so that the cap goes fast.
MODEL = "alerts-test-model"
MAX_OUTPUT = 12


def matches(alert: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    return alert["labels"].get("alertname") == name and all(
        alert["labels"].get(k) == v for k, v in labels.items()
    )


async def wait_firing(
    prom: PrometheusServer, name: str, labels: dict[str, str], since: float
) -> dict[str, Any]:
    """The firing alert `name` with `labels`, polled until WITHIN_S after `since`."""
    while True:
        for alert in await asyncio.to_thread(prom.firing):
            if matches(alert, name, labels):
                # The figure, for docs/operations.md (pytest -s shows it).
                print(f"{name} {labels}: firing {time.monotonic() - since:.0f} s after its fault")
                return alert
        if time.monotonic() - since > WITHIN_S:
            pending = [a["labels"] for a in await asyncio.to_thread(prom.alerts)]
            raise AssertionError(
                f"{name} {labels} not firing within {WITHIN_S:g} s of its fault; alerts: {pending}"
            )
        await asyncio.sleep(1)


def process(sys_: System, match: Callable[[psutil.Process], bool]) -> psutil.Process:
    found = [p for p in sys_.descendants() if match(p)]
    assert len(found) == 1, [p.cmdline() for p in sys_.descendants()]
    return found[0]


def service_process(sys_: System, module: str) -> psutil.Process:
    return process(sys_, lambda p: f"{module}.main" in " ".join(p.cmdline()))


@contextlib.contextmanager
def frozen(proc: psutil.Process) -> Iterator[None]:
    """SIGSTOP now, SIGCONT on the way out (whatever happens, so the system stops cleanly)."""
    proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGCONT)


@pytest.fixture
def stub() -> Iterator[AnthropicStub]:
    """The model provider, not started: nobody listens on its port until phase 2."""
    provider = AnthropicStub(port=free_port())
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def system(tmp_path: Path, stub: AnthropicStub) -> Iterator[tuple[System, str, dict[str, str]]]:
    if prometheus_binary() is None:
        pytest.skip("prometheus is not installed (scripts/ensure-test-tools.sh unpacks it)")
    sys_ = System(
        tmp_path,
        None,
        {
            "ANTHROPIC_API_KEY": "alerts-test",
            "ANTHROPIC_BASE_URL": stub.base_url,
            "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
            "LLM_GATEWAY_CIRCUIT_COOLDOWN_S": "5",
            # Output alone priced, 0.2 USD a token: a call's worst case (MAX_OUTPUT tokens) is
            # 2.4 USD of a 50 USD cap, and the stub's reply (~10 tokens) costs nearly that, so
            # a few dozen calls spend the cap.
            "LLM_DAILY_CAP_USD": "50",
            "PURPOSE_MODELS": json.dumps({"generate": MODEL}),
            "MODEL_PRICES": json.dumps({MODEL: {"input": 0, "output": 200_000}}),
            "RUNNER_SLOTS": "1",
        },
    )
    try:
        nats_url, urls = sys_.wait_table()
        yield sys_, nats_url, urls
    finally:
        sys_.kill()


def user_url(sys_: System, nats_url: str, user: str) -> str:
    password = (sys_.log.parent / "nats-credentials" / f"{user}.password").read_text().strip()
    parts = urlsplit(nats_url)
    return with_credentials(f"nats://{parts.hostname}:{parts.port}", user, password)


# editor-assist's own subject: the gateway knows its callers by the subject the bus lets them
# publish (issue 29 item 5), and generate is editor-assist's purpose.
CALLER_SUBJECT = subjects.llm_complete_subject("editor-assist")


async def model_calls(url: str, stop: asyncio.Event, *, pause_on_ok: bool = True) -> list[str]:
    """llm.v1.complete as editor-assist, each from another teacher (no rate limit in the way),
    one a second (back to back while they answer ok, with `pause_on_ok=False`), until `stop`
    or 600 calls: the codes the callers got."""
    nc = await nats_connect(url)
    codes: list[str] = []
    try:
        while not stop.is_set() and len(codes) < 600:
            n = len(codes)
            req = CompleteRequest(
                purpose=Purpose.generate,
                user=f"alerts-teacher-{n}",
                messages=[LlmMessage(role="user", content=f"alerts {n}")],
                max_output_tokens=MAX_OUTPUT,
                deadline_s=5,
            )
            try:
                await request(nc, CALLER_SUBJECT, req, CompleteReply, timeout=8)
                codes.append("ok")
            except Exception as e:
                codes.append(str(getattr(e, "code", type(e).__name__)))
            if codes[-1] == "ok" and not pause_on_ok:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1)
    finally:
        await nc.close()
    return codes


async def runner_bursts(url: str, stop: asyncio.Event) -> list[str]:
    """Bursts of 4 runner requests every half second against one slot (a program that sleeps
    1 s): all but one answer runner_busy. Bounded by `stop` and 400 requests."""
    nc = await nats_connect(url)
    run = RunRequest(
        language="python",
        files=[RunFile(path="main.py", content="import time\ntime.sleep(1)\n")],
        cases=[RunCase(name="sleep")],
        limits=RunLimits(wall_s=3),
    )
    codes: list[str] = []

    async def one() -> None:
        try:
            await request(nc, subjects.RUNNER_RUN, run, RunReply, timeout=10)
            codes.append("ok")
        except Exception as e:
            codes.append(str(getattr(e, "code", type(e).__name__)))

    try:
        while not stop.is_set() and len(codes) < 400:
            await asyncio.gather(*(one() for _ in range(4)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        await nc.close()
    return codes


async def dead_letter(url: str) -> None:
    """A review request that does not decode: review's consumer dead-letters it at once."""
    nc = await nats_connect(url)
    try:
        await nc.jetstream().publish(subjects.REVIEW_REQUESTS, b'{"not": "a review request"}')
    finally:
        await nc.close()


async def open_poll_on_a_broken_database(data: Path, url: str) -> str:
    """The poll's database loses its table of polls (a restore gone wrong): opening a poll then
    fails in a way no code of ours handles. The code the platform got."""
    with contextlib.closing(sqlite3.connect(data / "poll.db")) as db:
        db.execute("DROP TABLE polls")
        db.commit()
    body = {
        "evaluationId": "alerts-poll",
        "teacherId": "alerts-teacher",
        "audience": {"kind": "anonymous"},
        "question": {"prompt": "Une idée ?", "maxIdeas": 3},
        "openedAt": datetime.now(UTC).isoformat(),
    }
    nc = await nats_connect(url)
    try:
        reply = await nc.request(subjects.POLL_OPEN, json.dumps(body).encode(), timeout=10)
    finally:
        await nc.close()
    return (reply.headers or {}).get("Nats-Service-Error", "ok")


def test_each_fault_fires_its_named_alert_within_three_minutes(
    system: tuple[System, str, dict[str, str]], stub: AnthropicStub, tmp_path: Path
) -> None:
    sys_, nats_url, urls = system
    # Every family the running services export is on a rule or a panel (issue 35).
    exported = set()
    for url in urls.values():
        exported |= families(httpx.get(f"{url}/metrics", timeout=10).text)
    assert len(exported) > 100, exported
    left = uncovered(exported, RULES.read_text(), DASHBOARD.read_text())
    assert not left, f"exported, on no rule and no panel: {sorted(left)}"
    targets = [urlsplit(u).netloc for u in urls.values()]
    prom = PrometheusServer(tmp_path / "prometheus", targets, [RULES]).start()
    try:
        asyncio.run(phases(sys_, nats_url, prom, len(targets), stub))
    finally:
        prom.stop()


async def phases(
    sys_: System, nats_url: str, prom: PrometheusServer, targets: int, stub: AnthropicStub
) -> None:
    started = time.monotonic()
    while prom.targets_up() < targets:
        assert time.monotonic() - started < 60, prom.query("up")
        await asyncio.sleep(1)
    # Healthy: every target scraped for a while, and nothing fires.
    await asyncio.sleep(10)
    assert await asyncio.to_thread(prom.firing) == []
    assert {r["metric"]["service"] for r in prom.query("quiz:nats_connected == 1")} == {
        "llm_gateway",
        "runner",
        "editor_assist",
        "review",
        "poll",
        "lesson_fix",
    }

    # Phase 1: the faults that leave the bus up, together.
    caller = user_url(sys_, nats_url, "editor-assist")
    stop = asyncio.Event()
    since = time.monotonic()
    calls = asyncio.create_task(model_calls(caller, stop))
    bursts = asyncio.create_task(runner_bursts(caller, stop))
    platform = user_url(sys_, nats_url, "platform")
    await dead_letter(platform)
    assert await open_poll_on_a_broken_database(sys_.log.parent, platform) == "internal"
    with frozen(service_process(sys_, "quiz_lesson_fix")):
        try:
            fired = await asyncio.gather(
                wait_firing(prom, "QuizLlmProviderDown", {}, since),
                wait_firing(prom, "QuizLlmProviderErrors", {}, since),
                wait_firing(prom, "QuizRunnerBusy", {}, since),
                wait_firing(
                    prom, "QuizDeadLetters", {"service": "review", "reason": "invalid"}, since
                ),
                wait_firing(prom, "QuizServiceDown", {"service": "lesson_fix"}, since),
                wait_firing(prom, "QuizInternalErrors", {"service": "poll"}, since),
            )
        finally:
            stop.set()
            codes = await calls
            busy = await bursts
    for alert in fired:
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
    # What the alerts' texts promise callers is what they got.
    assert "llm_failed" in codes, codes
    assert "llm_failed" in fired[0]["annotations"]["description"]
    assert "runner_busy" in busy and "runner_busy" in fired[2]["annotations"]["summary"]
    # The frozen service alone is down: the others answer their scrapes.
    down = [a for a in await asyncio.to_thread(prom.firing) if matches(a, "QuizServiceDown", {})]
    assert [a["labels"]["service"] for a in down] in ([], ["lesson_fix"])

    # Phase 2: the provider is back (the circuit closes after its 5 s cooldown) and the calls
    # spend the cap until it refuses them.
    stub.start()
    stop = asyncio.Event()
    since = time.monotonic()
    spending = asyncio.create_task(model_calls(caller, stop, pause_on_ok=False))
    try:
        spent = await asyncio.gather(
            wait_firing(prom, "QuizLlmCapSpent", {}, since),
            wait_firing(
                prom,
                "QuizLlmCallsRefused",
                {"purpose": "generate", "outcome": "llm_budget_exhausted"},
                since,
            ),
        )
    finally:
        stop.set()
        codes = await spending
    assert "ok" in codes and "llm_budget_exhausted" in codes, codes
    assert all("llm_budget_exhausted" in a["annotations"]["description"] for a in spent)

    # Phase 3: the bus goes silent (a frozen nats-server: no FIN, no RST).
    nats = process(sys_, lambda p: p.name() == "nats-server")
    since = time.monotonic()
    with frozen(nats):
        lost = await asyncio.gather(
            *(
                wait_firing(prom, "QuizBusDisconnected", {"service": s}, since)
                for s in ("llm_gateway", "runner", "editor_assist", "review", "poll", "lesson_fix")
            )
        )
    assert all("NATS" in a["annotations"]["summary"] for a in lost)
