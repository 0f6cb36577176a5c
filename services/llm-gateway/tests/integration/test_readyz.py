"""`/readyz` of the gateway says whether a model provider is configured (issue 22): without
`ANTHROPIC_API_KEY` the gateway is ready yet every call answers `llm_not_configured`, and an
operator should not have to make a call to learn that."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


def settings(
    nats_url: str, database_url: str, keys: SigningKeys, tmp: Path, **kw: object
) -> Settings:
    return Settings(
        settle_journal_dir=str(tmp / "journal"),
        nats_url=nats_url,
        jwks_file=str(keys.jwks_path),
        database_url=database_url,
        daily_cap_usd=Decimal("3"),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("key", ["test-key", None], ids=["with-key", "without-key"])
async def test_readyz_says_whether_a_provider_is_configured(
    key: str | None,
    nats_url: str,
    database_url: str,
    anthropic_stub: AnthropicStub,
    signing_keys: SigningKeys,
    tmp_path: Path,
) -> None:
    s = settings(
        nats_url,
        database_url,
        signing_keys,
        tmp_path,
        anthropic_api_key=key,
        anthropic_base_url=anthropic_stub.base_url,
    )
    async with serve_app(create_app(s), s) as url, httpx.AsyncClient() as http:
        r = await http.get(f"{url}/readyz")
    assert r.status_code == 200, r.text  # ready either way: the gateway answers
    provider = r.json()["details"]["provider"]
    if key:
        assert provider == {
            "configured": True,
            "kind": "anthropic",
            "base_url": anthropic_stub.base_url,
        }
        assert key not in r.text
    else:
        assert provider["configured"] is False
        assert provider["calls_answer"] == "llm_not_configured"
        assert "ANTHROPIC_API_KEY" in provider["why"]
