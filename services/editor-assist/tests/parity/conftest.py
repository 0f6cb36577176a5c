"""The parity modules' HTTP half: a real NATS, the gateway and runner processes, the stub model.

One set of processes for the whole package: each parity module sends a few of its cases through
`POST /app/api/questions/{id}/generate` with the stub answering the platform-shaped proposal.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess, llm_gateway_process
from quiz_testkit.serving import serve_app


@pytest.fixture(scope="package")
def parity_gateway(
    nats_url: str, anthropic_stub_server: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    gateway = llm_gateway_process(
        nats_url, anthropic_stub_server.base_url, tmp_path_factory.mktemp("parity-gateway")
    )
    with gateway as proc:
        yield proc


@pytest.fixture(scope="package")
def parity_runner(
    nats_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    d = tmp_path_factory.mktemp("parity-runner")
    env = {"NATS_URL": nats_url, "QUIZ_DATA_DIR": str(d)}
    with ServiceProcess("quiz_runner.main", env, d / "runner.log") as proc:
        yield proc


@pytest.fixture(scope="package")
async def parity_url(
    nats_url: str,
    signing_keys: SigningKeys,
    parity_gateway: ServiceProcess,
    parity_runner: ServiceProcess,
) -> AsyncIterator[str]:
    settings = Settings(nats_url=nats_url, jwks_file=str(signing_keys.jwks_path))
    async with serve_app(create_app(settings), settings) as url:
        yield url


@dataclass
class Wand:
    """The wand over HTTP, with the stub answering what the test scripts."""

    url: str
    stub: AnthropicStub
    keys: SigningKeys

    async def generate(
        self,
        qtype: str,
        config: dict[str, Any],
        output: dict[str, Any] | None = None,
        *,
        explanation: str = "",
        item: int | None = None,
    ) -> httpx.Response:
        """POST the draft as a teacher of that type; `output` is the model's tool input."""
        if output is not None:
            self.stub.script(StubReply.tool(output))
        # A fresh teacher per call: the gateway's 10 a minute per teacher must not couple tests.
        token = self.keys.mint(
            f"teacher-{uuid.uuid4().hex[:8]}",
            {"question:42": {"role": "contributor", "type": qtype, "pool": "7"}},
        )
        body: dict[str, Any] = {"config": config, "explanation": explanation}
        if item is not None:
            body["item"] = item
        async with httpx.AsyncClient(timeout=120) as http:
            return await http.post(
                f"{self.url}/app/api/questions/42/generate",
                json=body,
                headers={"authorization": f"Bearer {token}"},
            )


@pytest.fixture
def wand(parity_url: str, anthropic_stub_server: AnthropicStub, signing_keys: SigningKeys) -> Wand:
    anthropic_stub_server.reset()
    return Wand(parity_url, anthropic_stub_server, signing_keys)
