"""lesson-fix with its real neighbours: a real NATS, the real gateway process, the scripted model,
a real siteverify server, a real database (SQLite; the rate-limit replica test adds PostgreSQL)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.domain.text import parse_markup, to_document
from quiz_lesson_fix.eval.cases import load_cases
from quiz_lesson_fix.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app
from quiz_testkit.siteverify_stub import DEFAULT_SECRET, SiteverifyStub


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


def lesson_fix_settings(
    nats_url: str, keys: SigningKeys, siteverify: SiteverifyStub, db: Path | str, **extra: Any
) -> Settings:
    url = db if isinstance(db, str) else f"sqlite:///{db}"
    return Settings(
        nats_url=nats_url,
        jwks_file=str(keys.jwks_path),
        database_url=url,
        verify_url=siteverify.url,
        verify_secret=DEFAULT_SECRET,
        **extra,
    )


@pytest.fixture(scope="session")
def settings_for() -> Callable[..., Settings]:
    """`settings_for(nats_url, keys, siteverify, db, **extra)`: a lesson-fix's settings."""
    return lesson_fix_settings


@pytest.fixture(scope="module")
async def service_url(
    nats_url: str,
    signing_keys: SigningKeys,
    llm_gateway: ServiceProcess,
    siteverify_server: SiteverifyStub,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[str]:
    """lesson-fix served in the test's loop on a real socket (rate limit: 100 a minute)."""
    db = tmp_path_factory.mktemp("lesson-fix") / "lesson-fix.db"
    settings = lesson_fix_settings(nats_url, signing_keys, siteverify_server, db, rate_limit=100)
    async with serve_app(create_app(settings), settings) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_stubs(stub: AnthropicStub, siteverify_server: SiteverifyStub) -> None:
    stub.reset()
    siteverify_server.reset()


@pytest.fixture
def author(signing_keys: SigningKeys) -> Callable[..., str]:
    """A token for a fresh lesson author (the gateway limits each person: tests stay apart)."""

    def mint(role: str = "contributor", grants: dict[str, Any] | None = None) -> str:
        sub = f"author-{uuid.uuid4().hex[:8]}"
        return signing_keys.mint(sub, {"lessons": {"role": role}} if grants is None else grants)

    return mint


class Lessons:
    """Lessons to send: the seeded-defect lessons of `quiz_lesson_fix.eval`, and variants."""

    @staticmethod
    def case(name: str) -> dict[str, Any]:
        """A seeded-defect lesson (a deep copy)."""
        return copy.deepcopy(next(c for c in load_cases() if c.name == name).lesson)

    @staticmethod
    def with_second_section(lesson: dict[str, Any]) -> dict[str, Any]:
        """The lesson and a defect-free second section of its own (ids `s2…`)."""
        lesson = copy.deepcopy(lesson)
        lesson["sections"].append(
            {
                "id": "s2",
                "name": "Le jardin",
                "blocks": [
                    {"id": "s2t1", "type": "text", "text": "Le jardinier arrose les TOMATES."},
                    {
                        "id": "s2q1",
                        "type": "question",
                        "questionType": "single",
                        "prompt": "Qui arrose ?",
                        "answer": "jardinier",
                    },
                ],
            }
        )
        return lesson

    @staticmethod
    def with_document(lesson: dict[str, Any], block_id: str, markup: str) -> dict[str, Any]:
        """The lesson with text block `block_id` stored as a document written in `markup`."""
        lesson = copy.deepcopy(lesson)
        for section in lesson["sections"]:
            for block in section["blocks"]:
                if block["id"] == block_id:
                    block.pop("text", None)
                    block["content"] = to_document(parse_markup(markup))
        return lesson


@pytest.fixture(scope="session")
def lessons() -> type[Lessons]:
    return Lessons


class Api:
    """The two routes of one lesson-fix, over real HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    @staticmethod
    def token() -> str:
        """A fresh verification token (the siteverify server takes each once)."""
        return f"tok-{uuid.uuid4().hex}"

    async def post(
        self, path: str, bearer: str | None, body: Any, *, ascii_only: bool = False
    ) -> httpx.Response:
        """POST `body` as JSON; `ascii_only` escapes every non-ASCII character as `\\uXXXX`
        (up to six bytes a UTF-16 unit, as a client with an ASCII-only encoder sends it)."""
        headers = {"content-type": "application/json"}
        if bearer:
            headers["authorization"] = f"Bearer {bearer}"
        content = json.dumps(body, ensure_ascii=ascii_only, separators=(",", ":")).encode()
        async with httpx.AsyncClient(timeout=120) as http:
            return await http.post(
                f"{self.url}/app/api/lessons/{path}", content=content, headers=headers
            )

    async def check(self, bearer: str | None, lesson: dict[str, Any]) -> httpx.Response:
        return await self.post("check", bearer, {"lesson": lesson})

    async def fix(
        self,
        bearer: str | None,
        lesson: dict[str, Any],
        key: str,
        verification: str | None = None,
        *,
        ascii_only: bool = False,
    ) -> httpx.Response:
        body = {"lesson": lesson, "key": key, "verification": verification or self.token()}
        return await self.post("fix", bearer, body, ascii_only=ascii_only)

    async def metric(self, name: str) -> float:
        """A sample of /metrics (0 when absent), e.g. `quiz_lesson_fix_fixes_total{...}`."""
        async with httpx.AsyncClient(timeout=10) as http:
            text = (await http.get(f"{self.url}/metrics")).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@pytest.fixture(scope="module")
def api(service_url: str) -> Api:
    return Api(service_url)
