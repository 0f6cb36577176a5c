"""The typed gateway client against a scripted llm-gateway stand-in on a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from decimal import Decimal

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
    Usage,
    UsageReply,
    UsageRequest,
)
from quiz_servicekit.app import ServiceRuntime, create_service_app
from quiz_servicekit.llm import CALLER_CODES, LlmClient
from quiz_servicekit.micro import MsgContext, endpoint
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


def call(text: str, deadline_s: float | None = None) -> CompleteRequest:
    return CompleteRequest(
        purpose=Purpose.generate,
        user="teacher-1",
        messages=[{"role": "user", "content": text}],
        deadline_s=deadline_s,
    )


@pytest.fixture
async def gateway(nats_url: str) -> AsyncIterator[None]:
    """Answers llm.v1.*: the message text names the error code to raise, or `slow`."""
    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name="llm-gateway", version="0.0.0", description="scripted", settings=settings
    )

    async def complete(req: CompleteRequest, _: MsgContext) -> CompleteReply:
        text = req.messages[0].content
        if text == "slow":
            await asyncio.sleep(5)
        elif text != "ok":
            raise ContractError(ErrorCode(text), f"scripted {text}", retry_after_s=3)
        usage = Usage(input_tokens=1, output_tokens=1, cost_usd=Decimal("0.01"))
        return CompleteReply(output="fine", model="m", usage=usage, attempts=1, call_id="c")

    async def availability(req: AvailabilityRequest, _: MsgContext) -> AvailabilityReply:
        return AvailabilityReply(available=True, models={}, remaining_usd=Decimal(1))

    async def usage(req: UsageRequest, _: MsgContext) -> UsageReply:
        return UsageReply(
            day=req.day or date(2026, 11, 30),
            cap_usd=Decimal(5),
            spent_usd=Decimal(1),
            reserved_usd=Decimal(0),
            remaining_usd=Decimal(4),
            by_purpose={},
            billed_to=req.billed_to,
        )

    runtime.add_endpoints(
        [
            endpoint(subjects.LLM_COMPLETE, complete),
            endpoint(subjects.LLM_AVAILABILITY, availability),
            endpoint(subjects.LLM_USAGE, usage),
        ]
    )
    async with serve_app(create_service_app(runtime), settings):
        yield


async def test_complete_answers_typed(gateway: None, nc: NATS) -> None:
    reply = await LlmClient(nc).complete(call("ok"))
    assert reply.output == "fine" and reply.usage.cost_usd == Decimal("0.01")


@pytest.mark.parametrize("code", sorted(CALLER_CODES))
async def test_the_codes_a_caller_may_see_pass_through(
    gateway: None, nc: NATS, code: ErrorCode
) -> None:
    with pytest.raises(ContractError) as e:
        await LlmClient(nc).complete(call(code.value))
    assert e.value.code == code and e.value.retry_after_s == 3


@pytest.mark.parametrize("code", ["invalid_request", "internal", "unavailable"])
async def test_every_other_code_is_llm_failed(gateway: None, nc: NATS, code: str) -> None:
    with pytest.raises(ContractError) as e:
        await LlmClient(nc).complete(call(code))
    assert e.value.code == ErrorCode.llm_failed


async def test_the_wait_is_the_deadline_plus_the_margin(gateway: None, nc: NATS) -> None:
    client = LlmClient(nc, deadline_margin_s=0.2)
    with pytest.raises(ContractError) as e:
        await client.complete(call("slow", deadline_s=0.1))
    assert e.value.code == ErrorCode.llm_failed and "0.3 s" in e.value.message


async def test_no_gateway_is_llm_failed_and_unavailable(nc: NATS) -> None:
    client = LlmClient(nc, query_timeout_s=0.5)
    with pytest.raises(ContractError) as e:
        await client.complete(call("ok"))
    assert e.value.code == ErrorCode.llm_failed
    availability = await client.availability(Purpose.generate)
    assert availability.available is False and availability.reason == ErrorCode.llm_failed


async def test_availability_and_usage(gateway: None, nc: NATS) -> None:
    client = LlmClient(nc)
    assert (await client.availability()).available
    usage = await client.usage(date(2026, 11, 29), billed_to="teacher-1")
    assert usage.day == date(2026, 11, 29) and usage.billed_to == "teacher-1"


async def test_a_prompt_too_large_for_the_bus_stays_the_callers_413(nc: NATS) -> None:
    with pytest.raises(ContractError) as e:
        await LlmClient(nc).complete(call("x" * (nc.max_payload + 1)))
    assert e.value.code == ErrorCode.payload_too_large and e.value.status == 413
