"""review with its real neighbours: its own nats-server (JetStream), the real gateway process
calling the scripted Anthropic stub, real databases (SQLite; PostgreSQL when it answers), real
HTTP. Events and requests are published with plain nats-py, as another system would."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_review.config import Settings
from quiz_review.main import create_app
from quiz_review.service import ReviewService
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import ServiceProcess, llm_gateway_process
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


def start_gateway(
    nats_url: str, stub: AnthropicStub, directory: Path, **env: str
) -> ServiceProcess:
    """The real llm-gateway as its own process on `nats_url`, calling the stub."""
    return llm_gateway_process(nats_url, stub.base_url, directory, **env)


@dataclass
class Bus:
    """A nats-server of its own and the gateway on it (one ledger per bus)."""

    nats: NatsServer
    gateway: ServiceProcess

    @property
    def url(self) -> str:
        return self.nats.url


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


@pytest.fixture(autouse=True)
def _fresh_stub(stub: AnthropicStub) -> None:
    stub.reset()


@contextmanager
def open_bus(stub: AnthropicStub, directory: Path, **gateway_env: str) -> Iterator[Bus]:
    """A nats-server of its own and a gateway on it (its env overridden by `gateway_env`)."""
    server = NatsServer(directory / "nats").start()
    try:
        with start_gateway(server.url, stub, directory / "gateway", **gateway_env) as gateway:
            yield Bus(server, gateway)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bus(stub: AnthropicStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bus]:
    """A bus and gateway for the module (cap 20 USD, the default per-person limits)."""
    with open_bus(stub, tmp_path_factory.mktemp("bus")) as b:
        yield b


def review_settings(nats_url: str, keys: SigningKeys, database_url: str, **extra: Any) -> Settings:
    """Settings for a review under test: the night only when a test runs it."""
    values: dict[str, Any] = {
        "nats_url": nats_url,
        "jwks_file": str(keys.jwks_path),
        "database_url": database_url,
        "night_at_start": False,
        "night_interval_s": 1e6,
        "request_ack_wait_s": 5.0,
        "llm_deadline_s": 30.0,
        **extra,
    }
    return Settings(**values)


class Clock:
    """The service's clock, moved by the test (an aware UTC datetime)."""

    def __init__(self, at: datetime | None = None) -> None:
        self.at = at or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.at


@dataclass
class Review:
    """One review service served on a real socket, with what a test needs to drive it."""

    url: str
    ref: Any
    nats_url: str
    keys: SigningKeys
    clock: Clock
    nc: NATS
    published: list[dict[str, Any]] = field(default_factory=list)

    @property
    def service(self) -> ReviewService:
        svc: ReviewService = self.ref()
        return svc

    # ---- tokens and HTTP -------------------------------------------------------------------

    def token(self, grants: dict[str, dict[str, Any]], sub: str | None = None) -> str:
        return self.keys.mint(sub or f"teacher-{uuid.uuid4().hex[:8]}", grants)

    async def call(
        self,
        method: str,
        path: str,
        token: str | None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        headers = {**({"authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        async with httpx.AsyncClient(timeout=60) as http:
            return await http.request(
                method, f"{self.url}/app/api{path}", json=body, headers=headers
            )

    # ---- the question store, as plain nats-py ----------------------------------------------

    async def publish(self, subject: str, payload: dict[str, Any], msg_id: str) -> Any:
        js = self.nc.jetstream()
        return await js.publish(
            subject, json.dumps(payload).encode(), headers={"Nats-Msg-Id": msg_id}
        )

    async def publish_version(
        self,
        *,
        question_id: str | None = None,
        pool_id: str = "pool-1",
        version_number: int = 1,
        type: str = "mcq",
        config: dict[str, Any] | None = None,
        explanation: str = "",
        published_at: str = "2026-07-01T14:05:00+02:00",
        live: bool = True,
        wait: bool = True,
    ) -> dict[str, Any]:
        event = {
            "questionId": question_id or f"q-{uuid.uuid4().hex[:12]}",
            "poolId": pool_id,
            "versionId": f"v-{uuid.uuid4().hex[:12]}",
            "versionNumber": version_number,
            "type": type,
            "config": config if config is not None else mcq(),
            "explanation": explanation,
            "publishedAt": published_at,
            "live": live,
            "internalName": "q",
        }
        await self.publish(
            "questions.v1.version.published", event, f"version-published:{event['versionId']}"
        )
        if wait:
            await self.wait_version(event["versionId"])
        return event

    async def wait_version(self, version_id: str, present: bool = True) -> None:
        async def there() -> bool:
            return (await self.service.repo.version(version_id) is not None) == present

        await eventually(there, f"version {version_id} {'in' if present else 'out of'} the model")

    async def enable_pool(self, pool_id: str) -> None:
        owner = self.token({f"pool:{pool_id}": {"role": "owner"}})
        r = await self.call("PUT", f"/pools/{pool_id}/review", owner, {"enabled": True})
        assert r.status_code == 200, r.text

    def contributor(self, question_id: str) -> str:
        return self.token({f"question:{question_id}": {"role": "contributor"}})


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 20.0
) -> None:
    """Wait until `check()` holds (consumers work asynchronously)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def mcq(prompt: str = "Quelle est la capitale de l'Australie ?") -> dict[str, Any]:
    """An mcq config in the platform's shape (configVersion 2)."""
    return {
        "configVersion": 2,
        "prompt": prompt,
        "choices": [
            {"text": "Sydney", "correct": True},
            {"text": "Canberra", "correct": False},
        ],
        "mode": "single",
        "policy": "inherit",
        "shuffleChoices": True,
    }


def finding(
    path: str,
    severity: str = "error",
    message: str = "Faux.",
    fix: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {"severity": severity, "path": path, "message": message, "fix": fix}


@asynccontextmanager
async def running_review(
    nats_url: str, keys: SigningKeys, database_url: str, clock: Clock | None = None, **extra: Any
) -> AsyncIterator[Review]:
    """A review served in the test's loop, and a plain NATS connection beside it."""
    clock = clock or Clock()
    settings = review_settings(nats_url, keys, database_url, **extra)
    app = create_app(settings, clock=clock)
    nc = await nats_connect(nats_url)
    try:
        async with serve_app(app, settings) as url:
            yield Review(url, app.state.review, nats_url, keys, clock, nc)
    finally:
        await nc.drain()


@pytest.fixture
async def review(bus: Bus, signing_keys: SigningKeys, database_url: str) -> AsyncIterator[Review]:
    """A review on the module's bus, on SQLite and on PostgreSQL."""
    async with running_review(bus.url, signing_keys, database_url) as r:
        yield r


@pytest.fixture
async def review_sqlite(
    bus: Bus, signing_keys: SigningKeys, tmp_path: Path
) -> AsyncIterator[Review]:
    """A review on the module's bus, on SQLite only."""
    async with running_review(bus.url, signing_keys, f"sqlite:///{tmp_path / 'r.db'}") as r:
        yield r
