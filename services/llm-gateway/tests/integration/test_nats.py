"""The gateway as a NATS micro service: endpoints, error replies, $SRV discovery, admin view."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    Purpose,
    UsageReply,
    UsageRequest,
)
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.main import create_app
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app


def complete_request(**overrides: Any) -> CompleteRequest:
    body: dict[str, Any] = {
        "purpose": "generate",
        "user": "teacher-1",
        "messages": [{"role": "user", "content": "Propose the key."}],
        "output_schema": {
            "name": "proposal",
            "json_schema": {
                "type": "object",
                "properties": {"choices": {"type": "array", "items": {"type": "string"}}},
                "required": ["choices"],
            },
        },
        "max_output_tokens": 300,
    }
    body.update(overrides)
    return CompleteRequest.model_validate(body)


@pytest.fixture
async def gateway_url(
    nats_url: str,
    database_url: str,
    anthropic_stub: AnthropicStub,
    signing_keys: SigningKeys,
    tmp_path: Any,
) -> AsyncIterator[str]:
    settings = Settings(
        settle_journal_dir=str(tmp_path / "journal"),
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        database_url=database_url,
        anthropic_api_key="test-key",
        anthropic_base_url=anthropic_stub.base_url,
        daily_cap_usd=Decimal("3"),
    )
    async with serve_app(create_app(settings), settings) as url:
        yield url


async def test_complete_over_nats(
    gateway_url: str, nc: NATS, anthropic_stub: AnthropicStub
) -> None:
    anthropic_stub.script(StubReply.tool({"choices": ["4"]}))
    reply = await request(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply, timeout=10)
    assert reply.output == {"choices": ["4"]} and reply.attempts == 1
    assert reply.usage.cost_usd > 0
    raw = json.loads(reply.model_dump_json())
    assert isinstance(raw["usage"]["cost_usd"], str), "money travels as a decimal string"


async def test_error_codes_over_nats(
    gateway_url: str, nc: NATS, anthropic_stub: AnthropicStub
) -> None:
    bad = {"purpose": "nope", "user": None, "messages": []}
    msg = await nc.request(subjects.LLM_COMPLETE, json.dumps(bad).encode(), timeout=5)
    assert msg.headers and msg.headers["Nats-Service-Error"] == "invalid_request"
    assert json.loads(msg.data)["code"] == "invalid_request"

    anthropic_stub.script(*[StubReply.error(500)] * 10)
    with pytest.raises(ContractError) as info:
        await request(
            nc, subjects.LLM_COMPLETE, complete_request(deadline_s=1.5), CompleteReply, timeout=10
        )
    assert info.value.code is ErrorCode.llm_failed

    anthropic_stub.reset()
    for _ in range(9):  # ten per minute per teacher; the failed call above was the first
        await request(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply, timeout=10)
    with pytest.raises(ContractError) as info:
        await request(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply, timeout=10)
    assert info.value.code is ErrorCode.rate_limited
    assert info.value.retry_after_s is not None and 0 < info.value.retry_after_s <= 60


async def test_availability_and_usage_over_nats(
    gateway_url: str, nc: NATS, signing_keys: SigningKeys
) -> None:
    availability = await request(
        nc, subjects.LLM_AVAILABILITY, AvailabilityRequest(), AvailabilityReply, timeout=5
    )
    assert availability.available and availability.circuit == "closed"
    assert availability.models[Purpose.poll] == "claude-haiku-4-5"
    assert availability.remaining_usd == Decimal("3")
    await request(
        nc,
        subjects.LLM_COMPLETE,
        complete_request(purpose="review", user=None),
        CompleteReply,
        timeout=10,
    )
    night = complete_request(purpose="review", user=None)
    usage = await request(
        nc, subjects.LLM_USAGE, UsageRequest(estimate=night), UsageReply, timeout=5
    )
    assert usage.estimate_usd is not None and usage.estimate_usd > 0
    assert usage.held_by_purpose[Purpose.review].no_person == 0
    review = usage.by_purpose[Purpose.review]
    assert review.no_person.calls == 1 and review.person.calls == 0
    assert usage.spent_usd == review.total.cost_usd > 0
    assert usage.cap_usd == Decimal("3")

    async with httpx.AsyncClient(base_url=gateway_url) as http:
        teacher = signing_keys.mint("teacher-1", {"question:1": {"role": "owner"}})
        hidden = await http.get("/admin/usage", headers={"authorization": f"Bearer {teacher}"})
        assert hidden.status_code == 404
        assert (await http.get("/admin/usage")).status_code == 401
        ops = signing_keys.mint("ops-1", {"ops": {"role": "viewer"}})
        admin = (await http.get("/admin/usage", headers={"authorization": f"Bearer {ops}"})).json()
        assert Decimal(admin["spent_usd"]) == usage.spent_usd
        metrics = (await http.get("/metrics")).text
        assert "quiz_llm_gateway_calls_total" in metrics
        assert "quiz_llm_gateway_budget_remaining_usd" in metrics


async def test_stats_count_error_replies(gateway_url: str, nc: NATS) -> None:
    for _ in range(2):
        with pytest.raises(ContractError):
            await request(
                nc,
                subjects.LLM_COMPLETE,
                complete_request(output_schema={"name": "x", "json_schema": {"type": "string"}}),
                CompleteReply,
                timeout=5,
            )
    await nc.request(subjects.LLM_COMPLETE, b"{not json", timeout=5)
    msg = await nc.request("$SRV.STATS.llm-gateway", b"", timeout=5)
    [complete] = [e for e in json.loads(msg.data)["endpoints"] if e["subject"] == "llm.v1.complete"]
    assert complete["num_errors"] == 3 and complete["num_requests"] == 3
    assert complete["last_error"] == "invalid_request"


async def test_service_is_discoverable(gateway_url: str, nc: NATS) -> None:
    msg = await nc.request("$SRV.INFO.llm-gateway", b"", timeout=5)
    info = json.loads(msg.data)
    assert {e["subject"] for e in info["endpoints"]} == {
        subjects.LLM_COMPLETE_BY_CALLER,  # the services', each on its own (issue 29)
        subjects.LLM_COMPLETE,  # the operators'
        subjects.LLM_AVAILABILITY,
        subjects.LLM_USAGE,
    }


async def test_handler_does_not_serialise(
    gateway_url: str, nc: NATS, anthropic_stub: AnthropicStub
) -> None:
    anthropic_stub.default = StubReply.slow(0.5, StubReply.auto())
    users = [f"t{i}" for i in range(20)]
    started = asyncio.get_running_loop().time()
    await asyncio.gather(
        *[
            request(nc, subjects.LLM_COMPLETE, complete_request(user=u), CompleteReply, timeout=10)
            for u in users
        ]
    )
    # Twenty half-second calls answered together, not one after the other (10 s).
    assert asyncio.get_running_loop().time() - started < 5


async def test_without_a_key_the_service_starts_and_answers_not_configured(
    nats_url: str, tmp_path: Any, nc: NATS
) -> None:
    settings = Settings(
        nats_url=nats_url,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'nokey.db'}",
        settle_journal_dir=str(tmp_path / "journal"),
        anthropic_api_key="",
    )
    async with serve_app(create_app(settings), settings):
        with pytest.raises(ContractError) as info:
            await request(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply, timeout=5)
        assert info.value.code is ErrorCode.llm_not_configured
        # On the bus too, the refusal says how to get a model (issue 34 item 3).
        assert "ANTHROPIC_API_KEY" in info.value.message, info.value.message
        assert "make run DEMO=1" in info.value.message, info.value.message
        availability = await request(
            nc, subjects.LLM_AVAILABILITY, AvailabilityRequest(), AvailabilityReply, timeout=5
        )
        assert availability.reason is ErrorCode.llm_not_configured
