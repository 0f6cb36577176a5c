"""One cluster session for the whole chaos suite (issue 20, item 5), real processes only.

A 3-node nats-server cluster with JetStream (`quiz_testkit.nats_cluster`), every stream and KV
bucket at `NATS_STREAM_REPLICAS=3`; PostgreSQL with a fresh database per service, the
gateway's reached through a TCP proxy the suite shuts (`quiz_testkit.tcp_proxy`); two
replicas each of llm-gateway, review and poll as their own processes, all on the cluster; the
Anthropic stub in this process answering after a delay (`load.ModelStub`). The load runs from
the first phase to the last (`ChaosSystem.start_load`); the phases of test_cluster_faults.py
inject their faults into it, in order, and the last test checks what the whole session left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts.bus import inbox_prefix
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.databases import PG_HOST, PG_PORT, postgres_available, postgres_database
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_cluster import NatsCluster, nats_cluster
from quiz_testkit.processes import ServiceProcess, llm_gateway_process
from quiz_testkit.tcp_proxy import TcpProxy

from .load import DirectLoad, ModelStub, PollLoad, ReviewLoad, now

# The consumers' ack_wait (review: REVIEW_REQUEST_ACK_WAIT_S, its default; poll-ai: 30 s in
# quiz_poll.consumers): work a dead replica held comes back to another one within it.
ACK_WAIT_S = 30.0
# "Resumes" is when an item asked for after the fault is done, or an item a killed replica
# held: its redelivery within ack_wait, plus the item's own work on this loaded 2-core host
# (the poll's 3 s job delay, a 2 s model call, the writes).
WORK_ALLOWANCE_S = 10.0
CAP_USD = 50
STREAM_REPLICAS = 3
# A settle the database has not taken by then goes to the journal (the gateway's default).
SETTLE_TIMEOUT_S = 5.0


class Figures:
    """What each check measured, printed as it is measured (CI's log keeps them), failures
    collected so that every figure of a test is printed before the test fails."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failed: list[str] = []

    def say(self, text: str) -> None:
        capture = self.config.pluginmanager.getplugin("capturemanager")
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        line = f"[chaos] {text}"
        if capture is None or reporter is None:
            print(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    def check(self, name: str, figure: Any, ok: bool) -> bool:
        self.say(f"{name}: {figure} — {'ok' if ok else 'FAILED'}")
        if not ok:
            self.failed.append(f"{name}: {figure}")
        return ok

    def verify(self) -> None:
        failed, self.failed = self.failed, []
        assert not failed, "chaos checks failed:\n" + "\n".join(failed)


@pytest.fixture
def figures(pytestconfig: pytest.Config) -> Figures:
    return Figures(pytestconfig)


def metric(url: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """One sample of a service's /metrics (None when absent or unreachable)."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=2) as r:  # noqa: S310
            text = r.read().decode()
    except OSError:
        return None
    total: float | None = None
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if not m:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if labels and any(found.get(k) != v for k, v in labels.items()):
            continue
        total = (total or 0.0) + float(m.group(2))
    return total


@dataclass
class Replica:
    kind: str  # llm-gateway | review | poll
    index: int
    proc: ServiceProcess
    alive: bool = True


@dataclass
class ChaosSystem:
    cluster: NatsCluster
    stub: AnthropicStub
    model: ModelStub
    proxy: TcpProxy
    gateway_db: str  # direct (the suite's reads), the gateways reach it through the proxy
    review_db: str
    poll_db: str
    keys: SigningKeys
    root: Path
    replicas: list[Replica] = field(default_factory=list)
    nc: NATS | None = None
    review: ReviewLoad | None = None
    poll: PollLoad | None = None
    direct: DirectLoad | None = None
    stop_load: asyncio.Event = field(default_factory=asyncio.Event)
    load_tasks: list[asyncio.Task[None]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    nats_down: int | None = None  # the node (a) killed, until (b) starts it again
    watcher: asyncio.Task[None] | None = None
    running: set[asyncio.Task[Any]] = field(default_factory=set)  # the load's calls

    # ---- processes ------------------------------------------------------------------------

    @property
    def nats_url(self) -> str:
        # No credentials in the URLs: each service connects as its own bus user
        # (NATS_CREDENTIALS_DIR, set for the session by the test kit's plugin).
        return ",".join(self.cluster.plain_urls)

    def gateway_url(self) -> str:
        name = self.gateway_db.rsplit("/", 1)[1]
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.proxy.port}/{name}"

    def _process(self, kind: str, index: int) -> ServiceProcess:
        d = self.root / f"{kind}-{index}"  # a fresh directory: a new pod, no volume
        d.mkdir(parents=True)
        common = {"NATS_STREAM_REPLICAS": str(STREAM_REPLICAS), "LOG_LEVEL": "INFO"}
        if kind == "llm-gateway":
            return llm_gateway_process(
                self.nats_url,
                self.stub.base_url,
                d,
                DATABASE_URL=self.gateway_url(),
                LLM_DAILY_CAP_USD=str(CAP_USD),
                LLM_RATE_LIMITS=json.dumps({"generate": 0, "review": 0, "poll": 0}),
                LLM_GATEWAY_SWEEP_INTERVAL_S="5",
                LLM_GATEWAY_SETTLE_TIMEOUT_S=str(SETTLE_TIMEOUT_S),
                **common,
            )
        env = {
            "NATS_URL": self.nats_url,
            "JWKS_FILE": str(self.keys.jwks_path),
            "QUIZ_DATA_DIR": str(d),
            **common,
        }
        if kind == "review":
            env |= {
                "DATABASE_URL": self.review_db,
                "REVIEW_NIGHT_AT_START": "false",
                "REVIEW_NIGHT_INTERVAL_S": "100000",
                "REVIEW_LLM_DEADLINE_S": "30",
                "REVIEW_REQUEST_ACK_WAIT_S": str(ACK_WAIT_S),
            }
            return ServiceProcess("quiz_review.main", env, d / "review.log")
        env |= {"DATABASE_URL": self.poll_db, "POLL_AI_DEADLINE_S": "30"}
        return ServiceProcess("quiz_poll.main", env, d / "poll.log")

    async def start(self, kind: str) -> Replica:
        """A new replica of `kind`, started (its /readyz 200) without blocking the loop."""
        index = sum(r.kind == kind for r in self.replicas)
        proc = self._process(kind, index)
        await asyncio.to_thread(proc.start, 120.0)
        replica = Replica(kind, index, proc)
        self.replicas.append(replica)
        return replica

    def live(self, kind: str) -> list[Replica]:
        return [r for r in self.replicas if r.kind == kind and r.alive]

    def kill(self, replica: Replica) -> float:
        """kill -9 (the whole process group): no shutdown, no nak, no flush."""
        os.killpg(replica.proc.pid, signal.SIGKILL)
        replica.alive = False
        t = now()
        self.events.append((t, f"kill -9 {replica.kind}-{replica.index}"))
        return t

    def poll_urls(self) -> list[str]:
        return [r.proc.url for r in self.live("poll")]

    def stop_all(self) -> None:
        """SIGTERM every replica still alive, all at once (each may take its grace period)."""
        alive = [r for r in self.replicas if r.alive]

        def stop(r: Replica) -> None:
            with contextlib.suppress(Exception):
                r.proc.stop()
            r.alive = False

        with ThreadPoolExecutor(max(1, len(alive))) as pool:
            list(pool.map(stop, alive))

    # ---- the load -------------------------------------------------------------------------

    async def connect(self, user: str) -> NATS:
        """A client of the cluster as bus user `user`, reconnecting for ever (as a service)."""

        async def quiet(_: Exception) -> None:
            # A node gone is the scenario: nats-py would log each refused reconnect with its
            # traceback, burying the figures in CI's log.
            return None

        return await nats.connect(
            error_cb=quiet,
            servers=self.cluster.urls_for(user),
            name=f"chaos-{user}",
            # The locked bus delivers a user's replies under its own prefix only.
            inbox_prefix=inbox_prefix(user),
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            connect_timeout=5,
        )

    async def start_load(self, polls: int = 3) -> None:
        self.nc = await self.connect("ops")
        direct_nc = await self.connect("editor-assist")
        self.review = ReviewLoad(self.nc, self.review_db)
        self.poll = PollLoad(self.nc, self.keys, self.poll_db, self.poll_urls)
        self.direct = DirectLoad(direct_nc)
        for i in range(polls):
            assert await self.poll.open_poll(f"chaos-poll-{i}"), "a brainstorm could not open"
        review, poll, direct = self.review, self.poll, self.direct

        running = self.running

        async def every(period_s: float, fn: Any) -> None:
            # Each unit of work in its own task: a slow one never holds the rate back.
            while not self.stop_load.is_set():
                task = asyncio.create_task(fn())
                running.add(task)
                task.add_done_callback(running.discard)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop_load.wait(), period_s)
            if running:
                await asyncio.gather(*list(running), return_exceptions=True)

        answers = iter(range(1_000_000))

        async def one_answer() -> None:
            k = next(answers)
            evaluation = poll.polls[k % len(poll.polls)]
            await poll.answer(evaluation, [f"chaos {k} idee {j}" for j in range(2)])

        async def watch() -> None:
            while True:
                with contextlib.suppress(Exception):
                    await review.watch_once()
                    await poll.watch_once()
                await asyncio.sleep(0.5)

        self.load_tasks = [
            asyncio.create_task(every(0.7, review.submit)),
            asyncio.create_task(every(1.0, one_answer)),
            asyncio.create_task(every(1.5, direct.call)),
        ]
        self.watcher = asyncio.create_task(watch())

    async def end_load(self) -> None:
        """Stop adding work and wait for what was started (each caller retries until it is
        answered or gives up)."""
        self.stop_load.set()
        await asyncio.gather(*self.load_tasks, return_exceptions=True)

    async def close(self) -> None:
        self.stop_load.set()
        for task in [*self.load_tasks, *self.running]:  # a failed test may leave callers retrying
            task.cancel()
        await asyncio.gather(*self.load_tasks, return_exceptions=True)
        if self.watcher is not None:
            self.watcher.cancel()
        if self.poll is not None:
            await self.poll.aclose()
        for client in (self.nc, self.direct.nc if self.direct else None):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()


@pytest.fixture(scope="module")
def chaos_dbs() -> Iterator[tuple[str, str, str]]:
    if not postgres_available():
        pytest.skip(f"the chaos suite needs PostgreSQL on {PG_HOST}:{PG_PORT}")
    with (
        postgres_database("quiz_chaos_gw") as gw,
        postgres_database("quiz_chaos_review") as review,
        postgres_database("quiz_chaos_poll") as poll,
    ):
        yield gw, review, poll


@pytest.fixture(scope="module")
async def chaos(
    chaos_dbs: tuple[str, str, str],
    anthropic_stub_server: AnthropicStub,
    request: pytest.FixtureRequest,
) -> AsyncIterator[ChaosSystem]:
    """The system up and the load running (see the module docstring).

    Its files (NATS stores, the services' directories and logs, the JWKS) live in a directory
    of its own, not under pytest's base temp: a pytest started meanwhile by another run on the
    machine may prune old base temps, and this session lasts minutes. Kept when a test failed.
    """
    gw, review, poll = chaos_dbs
    root = Path(tempfile.mkdtemp(prefix="quiz-chaos-"))
    signing_keys = SigningKeys.load_or_create(root / "jwt")
    failed_before = request.session.testsfailed
    anthropic_stub_server.reset()
    model = ModelStub(anthropic_stub_server)
    anthropic_stub_server.record_requests = False  # the model keeps what the checks need
    with (
        nats_cluster(3, directory=root / "nats") as cluster,
        TcpProxy(PG_HOST, PG_PORT) as proxy,
    ):
        system = ChaosSystem(
            cluster, anthropic_stub_server, model, proxy, gw, review, poll, signing_keys, root
        )
        try:
            # The first replica of each migrates its database; the second starts on it.
            await asyncio.gather(*(system.start(k) for k in ("llm-gateway", "review", "poll")))
            await asyncio.gather(*(system.start(k) for k in ("llm-gateway", "review", "poll")))
            await system.start_load()
            yield system
        finally:
            await system.close()
            system.stop_all()
            anthropic_stub_server.record_requests = True
            anthropic_stub_server.reset()
    if request.session.testsfailed == failed_before:
        shutil.rmtree(root, ignore_errors=True)
    else:
        Figures(request.config).say(f"logs and stores kept in {root}")
