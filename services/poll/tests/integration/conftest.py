"""poll with its real neighbours: a real NATS (JetStream on), the real gateway process calling
the scripted anthropic stub, a real database, the service over real HTTP, a clock moved by hand."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.poll import BrainstormClose, BrainstormOpen, PollAck, PollJoin
from quiz_poll.config import Settings
from quiz_poll.main import create_app
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app


class Clock:
    """Wall-clock time plus an offset the test moves (the cool-down, the 30 days)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


def poll_settings(nats_url: str, keys: SigningKeys, db: str, **extra: Any) -> Settings:
    return Settings(
        nats_url=nats_url,
        jwks_file=str(keys.jwks_path),
        database_url=db,
        frame_interval_s=0.05,
        availability_ttl_s=0,
        freeze_every_s=0.5,
        # Polls leave memory after 2 idle seconds: every test also runs across reloads.
        idle_evict_s=2.0,
        **extra,
    )


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def poll_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The SQLite file of the module's poll service."""
    return str(tmp_path_factory.mktemp("poll") / "poll.db")


@pytest.fixture(scope="module")
async def service_url(
    nats_url: str,
    signing_keys: SigningKeys,
    llm_gateway: ServiceProcess,
    clock: Clock,
    poll_db: str,
) -> AsyncIterator[str]:
    """poll served in the test's loop on a real socket (SQLite)."""
    settings = poll_settings(nats_url, signing_keys, f"sqlite:///{poll_db}")
    async with serve_app(create_app(settings, clock=clock), settings) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_stub(stub: AnthropicStub) -> None:
    stub.reset()


def new_id() -> str:
    return f"ev{uuid.uuid4().hex[:12]}"


class Room:
    """One brainstorm: the teacher, its participants, the routes over real HTTP and NATS."""

    def __init__(self, url: str, keys: SigningKeys, nc: NATS, evaluation_id: str) -> None:
        self.url = url
        self.keys = keys
        self.nc = nc
        self.id = evaluation_id
        self.teacher = f"teacher-{evaluation_id}"
        self.http = httpx.AsyncClient(base_url=url, timeout=60)

    @property
    def base(self) -> str:
        return f"/app/api/evaluations/{self.id}/poll"

    def staff_token(self) -> str:
        return self.keys.mint(self.teacher, {f"evaluation:{self.id}": {"role": "owner"}})

    def guest_token(self, attempt: str) -> str:
        grant = {"role": "viewer", "attempt": attempt, "guest": True}
        return self.keys.mint(f"guest-{attempt}", {f"evaluation:{self.id}": grant})

    def account_token(self, attempt: str, user: str) -> str:
        grant = {"role": "viewer", "attempt": attempt, "guest": False}
        return self.keys.mint(user, {f"evaluation:{self.id}": grant})

    async def open(
        self,
        *,
        anonymous: bool = True,
        roster: list[dict[str, str]] | None = None,
        prompt: str = "Qu'est-ce qui caractérise le vivant ?",
        max_ideas: int = 5,
    ) -> PollAck:
        audience: dict[str, Any] = (
            {"kind": "anonymous"} if anonymous else {"kind": "classroom", "classroomId": "c1"}
        )
        body = BrainstormOpen.model_validate(
            {
                "evaluationId": self.id,
                "teacherId": self.teacher,
                "audience": audience,
                "question": {"prompt": prompt, "maxIdeas": max_ideas},
                "roster": roster or [],
                "openedAt": datetime.now(UTC),
            }
        )
        return await request(self.nc, subjects.POLL_OPEN, body, PollAck, timeout=10)

    async def close(self, closed_at: datetime) -> PollAck:
        body = BrainstormClose(evaluation_id=self.id, closed_at=closed_at)
        return await request(self.nc, subjects.POLL_CLOSE, body, PollAck, timeout=10)

    async def join(
        self, attempt: str, *, user: str | None = None, person: dict[str, str] | None = None
    ) -> PollAck:
        body = PollJoin.model_validate(
            {
                "evaluationId": self.id,
                "participant": {
                    "attemptId": attempt,
                    "kind": "account" if user else "guest",
                    "userId": user,
                },
                "person": person,
            }
        )
        return await request(self.nc, subjects.POLL_JOIN, body, PollAck, timeout=10)

    async def answer(
        self, attempt: str, ideas: list[str], token: str | None = None
    ) -> httpx.Response:
        token = token or self.guest_token(attempt)
        return await self.http.post(
            f"{self.base}/answer",
            json={"ideas": ideas},
            headers={"authorization": f"Bearer {token}"},
        )

    async def staff(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.staff_token()}"}
        return await self.http.request(method, f"{self.base}{path}", json=body, headers=headers)

    async def board(self) -> dict[str, Any]:
        r = await self.staff("GET", "/ideas")
        assert r.status_code == 200, r.text
        return r.json()

    async def act(self, body: dict[str, Any]) -> httpx.Response:
        return await self.staff("POST", "/ideas", body)

    async def reveal(self, **switches: bool) -> httpx.Response:
        return await self.staff("POST", "/reveal", switches)

    async def tally(self, audience: str = "wall") -> dict[str, Any]:
        r = await self.staff("GET", f"/tally?audience={audience}")
        assert r.status_code == 200, r.text
        return r.json()

    async def statuses(self) -> dict[str, dict[str, Any]]:
        board = await self.board()
        return {v["key"]: v for c in board["clusters"] for v in c["variants"]}

    async def aclose(self) -> None:
        await self.http.aclose()


@pytest.fixture
async def room(service_url: str, signing_keys: SigningKeys, nc: NATS) -> AsyncIterator[Room]:
    r = Room(service_url, signing_keys, nc, new_id())
    yield r
    await r.aclose()


async def eventually(check: Any, timeout: float = 15.0, every: float = 0.05) -> Any:
    """Await `check()` until it returns a truthy value (or fail after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {value!r}")
        await asyncio.sleep(every)


def sse_frames(raw: str) -> list[dict[str, Any]]:
    """The events of an SSE text: [{event, id, data}]."""
    out = []
    for block in raw.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        if "data" in fields:
            fields["data"] = json.loads(fields["data"])
            out.append(fields)
    return out
