"""The wand's proposal comes back linted (issue 30): editor-assist asks the review service
(`review.v1.lint`, as its own bus user on a locked nats-server, the review a process of its own)
and returns the findings beside the proposal; without a review the proposal still comes back,
without findings and with the reason."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer
from quiz_testkit.processes import ServiceProcess, llm_gateway_process
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DRAFT = {
    "configVersion": 2,
    "prompt": "Quelle est la capitale de la Suisse ?",
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
    "choices": [{"text": "Berne", "correct": True}, {"text": "", "correct": False}],
}
PROPOSAL = {
    "choices": [
        {"text": "Genève", "correct": False},
        {"text": "Zurich", "correct": False},
        {"text": "Aucune de ces réponses", "correct": False},
    ]
}


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(
    bus: NatsServer, stub: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    d = tmp_path_factory.mktemp("gateway")
    env = {"NATS_CREDENTIALS_DIR": str(bus.credentials_dir)}
    with llm_gateway_process(bus.url, stub.base_url, d, **env) as gw:
        yield gw


def review_process(bus: NatsServer, d: Path, keys: SigningKeys) -> ServiceProcess:
    env = {
        "NATS_URL": bus.url,
        "NATS_CREDENTIALS_DIR": str(bus.credentials_dir),
        "DATABASE_URL": f"sqlite:///{d / 'review.db'}",
        "QUIZ_DATA_DIR": str(d),
        "JWKS_FILE": str(keys.jwks_path),
        "REVIEW_NIGHT_AT_START": "false",
    }
    return ServiceProcess("quiz_review.main", env, d / "review.log")


@pytest.fixture(scope="module")
async def wand(
    bus: NatsServer, gateway: ServiceProcess, signing_keys: SigningKeys
) -> AsyncIterator[str]:
    settings = Settings(
        nats_url=bus.url,
        nats_credentials_dir=str(bus.credentials_dir),
        jwks_file=str(signing_keys.jwks_path),
    )
    async with serve_app(create_app(settings), settings) as url:
        yield url


async def generate(url: str, keys: SigningKeys, body: dict[str, Any]) -> dict[str, Any]:
    token = keys.mint(f"t-{uuid.uuid4().hex[:6]}", {"question:1": {"role": "owner", "type": "mcq"}})
    async with httpx.AsyncClient(timeout=60) as http:
        r = await http.post(
            f"{url}/app/api/questions/1/generate",
            json=body,
            headers={"authorization": f"Bearer {token}"},
        )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def test_the_proposal_comes_back_with_the_lint_s_findings(
    wand: str,
    bus: NatsServer,
    stub: AnthropicStub,
    signing_keys: SigningKeys,
    tmp_path: Path,
) -> None:
    with review_process(bus, tmp_path, signing_keys):
        stub.script(StubReply.tool({"proposal": PROPOSAL, "explanation": ""}))
        result = await generate(wand, signing_keys, {"config": DRAFT, "language": "fr"})
    texts = [c["text"] for c in result["config"]["choices"]]
    assert texts == ["Berne", "Genève", "Zurich", "Aucune de ces réponses"]
    lint = result["lint"]
    assert lint["available"] is True and lint["reason"] is None
    assert lint["checked"] == [3, 4, 6, 9, 10, 11, 12, 14, 16, 17, 19]
    assert [(f["code"], f["path"]) for f in lint["findings"]] == [
        ("iwf.none_of_the_above", "choices.3")
    ]
    assert lint["findings"][0]["message"].startswith("Une réponse est « aucune")


async def test_without_a_review_the_proposal_still_comes_back(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(StubReply.tool({"proposal": PROPOSAL, "explanation": ""}))
    result = await generate(wand, signing_keys, {"config": DRAFT, "language": "fr"})
    assert len(result["config"]["choices"]) == 4
    lint = result["lint"]
    assert lint["available"] is False and lint["findings"] == []
    assert lint["reason"]["code"] == "unavailable"
