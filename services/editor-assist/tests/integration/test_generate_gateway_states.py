"""The wand when the gateway cannot call a model: no key (409) or the day's cap spent (429)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DRAFT = {
    "configVersion": 2,
    "prompt": "Quelle est la capitale de la Suisse ?",
    "mode": "single",
    "choices": [{"text": "Berne", "correct": True}, {"text": "", "correct": False}],
}


async def generate_with_gateway(
    tmp_path: Path, keys: SigningKeys, gateway_env: dict[str, str]
) -> httpx.Response:
    """One wand call on a bus of its own whose only gateway has `gateway_env`."""
    nats = NatsServer(tmp_path / "nats").start()
    try:
        env = {
            "NATS_URL": nats.url,
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}",
            "QUIZ_DATA_DIR": str(tmp_path),
            **gateway_env,
        }
        with ServiceProcess("quiz_llm_gateway.main", env, tmp_path / "gateway.log"):
            settings = Settings(nats_url=nats.url, jwks_file=str(keys.jwks_path))
            async with serve_app(create_app(settings), settings) as url:
                token = keys.mint(
                    f"t-{uuid.uuid4().hex[:6]}", {"question:1": {"role": "owner", "type": "mcq"}}
                )
                async with httpx.AsyncClient(timeout=60) as http:
                    avail = await http.get(
                        f"{url}/app/api/generate/availability",
                        headers={"authorization": f"Bearer {token}"},
                    )
                    assert avail.json()["available"] is False
                    return await http.post(
                        f"{url}/app/api/questions/1/generate",
                        json={"config": DRAFT},
                        headers={"authorization": f"Bearer {token}"},
                    )
    finally:
        nats.stop()


async def test_no_key_is_llm_not_configured(tmp_path: Path, signing_keys: SigningKeys) -> None:
    r = await generate_with_gateway(tmp_path, signing_keys, {"ANTHROPIC_API_KEY": ""})
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "llm_not_configured"
    # The person is told how to get a model: the key's name, or the demo (issue 34 item 3).
    message = r.json()["message"]
    assert "ANTHROPIC_API_KEY" in message and "make run DEMO=1" in message, message


async def test_spent_cap_is_llm_budget_exhausted(
    tmp_path: Path, signing_keys: SigningKeys, anthropic_stub: AnthropicStub
) -> None:
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": anthropic_stub.base_url,
        "LLM_DAILY_CAP_USD": "0",
    }
    r = await generate_with_gateway(tmp_path, signing_keys, env)
    assert r.status_code == 429, r.text
    assert r.json()["code"] == "llm_budget_exhausted"
    assert anthropic_stub.requests == []
