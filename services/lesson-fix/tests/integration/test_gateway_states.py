"""A fix when the gateway cannot call a model: its codes reach the editor as in the other services
(no key → 409 llm_not_configured, the day's cap spent → 429 llm_budget_exhausted)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app
from quiz_testkit.siteverify_stub import SiteverifyStub

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "E_GROUNDING_SINGLE:s1q2:TRAVAILLEUSES"


async def fix_with_gateway(
    tmp_path: Path,
    gateway_env: dict[str, str],
    settings_for: Callable[..., Settings],
    keys: SigningKeys,
    siteverify: SiteverifyStub,
    lesson: dict[str, Any],
    bearer: str,
) -> httpx.Response:
    """One fix on a bus of its own whose only gateway has `gateway_env`."""
    nats = NatsServer(tmp_path / "nats").start()
    try:
        env = {
            "NATS_URL": nats.url,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'gateway.db'}",
            "QUIZ_DATA_DIR": str(tmp_path),
            **gateway_env,
        }
        with ServiceProcess("quiz_llm_gateway.main", env, tmp_path / "gateway.log"):
            settings = settings_for(nats.url, keys, siteverify, tmp_path / "lesson-fix.db")
            async with serve_app(create_app(settings), settings) as url:
                async with httpx.AsyncClient(timeout=60) as http:
                    return await http.post(
                        f"{url}/app/api/lessons/fix",
                        json={"lesson": lesson, "key": KEY, "verification": "tok"},
                        headers={"authorization": f"Bearer {bearer}"},
                    )
    finally:
        nats.stop()


async def test_no_key_is_llm_not_configured(
    tmp_path: Path,
    settings_for: Callable[..., Settings],
    signing_keys: SigningKeys,
    siteverify: SiteverifyStub,
    lessons: Any,
    author: Callable[..., str],
) -> None:
    r = await fix_with_gateway(
        tmp_path,
        {"ANTHROPIC_API_KEY": ""},
        settings_for,
        signing_keys,
        siteverify,
        lessons.case("fr_grounding_single"),
        author(),
    )
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "llm_not_configured"


async def test_a_spent_cap_is_llm_budget_exhausted(
    tmp_path: Path,
    settings_for: Callable[..., Settings],
    signing_keys: SigningKeys,
    siteverify: SiteverifyStub,
    lessons: Any,
    author: Callable[..., str],
    anthropic_stub: AnthropicStub,
) -> None:
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": anthropic_stub.base_url,
        "LLM_DAILY_CAP_USD": "0",
    }
    r = await fix_with_gateway(
        tmp_path,
        env,
        settings_for,
        signing_keys,
        siteverify,
        lessons.case("fr_grounding_single"),
        author(),
    )
    assert r.status_code == 429, r.text
    assert r.json()["code"] == "llm_budget_exhausted"
    assert anthropic_stub.requests == []
