"""The typed gateway client against a scripted llm-gateway stand-in on a real nats-server, and
against the real gateway process (its ledger) on a nats-server restarted mid-call."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

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
from quiz_servicekit.llm import CALLER_CODES, LlmClient, LlmNotAnswered
from quiz_servicekit.micro import MsgContext, endpoint
from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import llm_gateway_process
from quiz_testkit.serving import serve_app

pytestmark = pytest.mark.integration


def call(
    text: str, deadline_s: float | None = None, request_id: str | None = None
) -> CompleteRequest:
    return CompleteRequest(
        purpose=Purpose.generate,
        user="teacher-1",
        messages=[{"role": "user", "content": text}],
        deadline_s=deadline_s,
        request_id=request_id,
    )


@pytest.fixture
def seen() -> list[str | None]:
    """The request_id of every llm.v1.complete the stand-in received, in order."""
    return []


def scripted_gateway(nats_url: str, seen: list[str | None]) -> Any:
    """The stand-in (see `gateway`) as an async context manager."""
    settings = ServiceSettings(nats_url=nats_url)
    runtime = ServiceRuntime(
        name="llm-gateway", version="0.0.0", description="scripted", settings=settings
    )

    async def complete(req: CompleteRequest, _: MsgContext) -> CompleteReply:
        text = req.messages[0].content
        seen.append(req.request_id)
        if text == "slow":
            await asyncio.sleep(5)
        elif text == "lose-first" and seen.count(req.request_id) == 1:
            # A reply that never reaches the caller (its first wait ends long before).
            await asyncio.sleep(2)
        elif text not in ("ok", "lose-first"):
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
    return serve_app(create_service_app(runtime), settings)


@pytest.fixture
async def gateway(nats_url: str, seen: list[str | None]) -> AsyncIterator[None]:
    """Answers llm.v1.*: the message text names the error code to raise, `slow`, or
    `lose-first` (the first send of a request id is never answered in time)."""
    async with scripted_gateway(nats_url, seen):
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
    client = LlmClient(nc, query_timeout_s=0.5, unreachable_wait_s=0.5)
    with pytest.raises(LlmNotAnswered) as e:
        await client.complete(call("ok"))
    assert e.value.code == ErrorCode.llm_failed and e.value.retry_after_s
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


# ---- a lost reply: asked again with the same id ---------------------------------------------


async def test_a_reply_not_had_in_time_is_asked_again_with_the_same_id(
    gateway: None, nc: NATS, seen: list[str | None]
) -> None:
    client = LlmClient(nc, deadline_margin_s=0.2, repeat_timeout_s=3)
    reply = await client.complete(call("lose-first", deadline_s=0.3, request_id="lost-1"))
    assert reply.output == "fine"
    assert seen == ["lost-1", "lost-1"]


async def test_without_a_request_id_a_lost_reply_is_never_asked_again(
    gateway: None, nc: NATS, seen: list[str | None]
) -> None:
    """A repeat without an id would be a second call, paid again: the caller is told instead,
    with an error a work queue takes for "retry later"."""
    client = LlmClient(nc, deadline_margin_s=0.2, repeat_timeout_s=3)
    with pytest.raises(LlmNotAnswered) as e:
        await client.complete(call("lose-first", deadline_s=0.3))
    assert e.value.code == ErrorCode.llm_failed and "0.5 s" in e.value.message
    assert seen == [None]


async def test_repeats_are_bounded(gateway: None, nc: NATS, seen: list[str | None]) -> None:
    """A gateway that never answers in time: the first send and one repeat fill the whole
    wait (deadline + margin, then repeat_timeout_s), then the caller is told."""
    client = LlmClient(nc, deadline_margin_s=0.1, repeat_timeout_s=0.5)
    with pytest.raises(LlmNotAnswered):
        await client.complete(call("slow", deadline_s=0.1, request_id="slow-1"))
    assert seen == ["slow-1", "slow-1"]


async def test_a_gateway_starting_meanwhile_is_waited_for(
    nats_url: str, nc: NATS, seen: list[str | None]
) -> None:
    """No responders (a gateway replica restarting, nothing delivered): sent again until the
    gateway answers, within unreachable_wait_s."""
    started = asyncio.Event()

    async def start_later() -> None:
        await asyncio.sleep(1.0)
        async with scripted_gateway(nats_url, seen):
            started.set()
            await asyncio.sleep(5)

    later = asyncio.create_task(start_later())
    try:
        reply = await LlmClient(nc, unreachable_wait_s=20).complete(call("ok", request_id="up"))
        assert started.is_set() and reply.output == "fine" and seen == ["up"]
    finally:
        later.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await later


# ---- the real gateway, its ledger, a nats-server restarted mid-call --------------------------


def ledger_rows(gateway_dir: Path, request_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(gateway_dir / "gateway.db") as db:
        return db.execute(
            "SELECT call_id, outcome FROM llm_ledger WHERE request_id = ?", (request_id,)
        ).fetchall()


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_nats_restart_mid_call_gets_the_paid_answer_once(
    anthropic_stub: AnthropicStub, tmp_path: Path
) -> None:
    """The broker restarts while the model answers: the reply sent after it is lost (it was
    asked on a connection that is gone). The client asks again with the same id once it has
    reconnected, and the gateway answers the repeat from the call it made — one provider
    request, one ledger row, the answer delivered."""
    server = NatsServer(tmp_path / "nats").start()
    gateway_dir = tmp_path / "gateway"
    try:
        with llm_gateway_process(server.url, anthropic_stub.base_url, gateway_dir):
            anthropic_stub.script(StubReply.slow(3, StubReply.text("the paid answer")))
            nc = await nats_connect(server.url_for("editor-assist"), reconnect_time_wait=0.2)
            try:
                client = LlmClient(nc)
                pending = asyncio.create_task(
                    client.complete(call("hello", deadline_s=20, request_id="restart-1"))
                )

                async def provider_asked() -> bool:
                    return len(anthropic_stub.requests) == 1

                await until(provider_asked, "the provider request")
                server.stop()
                server.start()
                reply = await asyncio.wait_for(pending, 30)
                assert reply.output == "the paid answer"
            finally:
                await nc.close()
            assert len(anthropic_stub.requests) == 1

            async def settled() -> bool:
                return len(ledger_rows(gateway_dir, "restart-1")) >= 1

            await until(settled, "the call's ledger row")
            rows = ledger_rows(gateway_dir, "restart-1")
            assert [outcome for _, outcome in rows] == ["ok"], rows
    finally:
        server.stop()
