"""The gateway against a real database and the real SDK talking to the stub."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteRequest, Purpose
from quiz_llm_gateway.domain.circuit import CircuitState
from quiz_llm_gateway.rows import Held, LedgerRow
from quiz_testkit.anthropic_stub import StubReply

from .conftest import HandClock, leased

SCHEMA = {
    "type": "object",
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
                "required": ["path", "message"],
            },
        }
    },
    "required": ["findings"],
}


def request(**overrides: Any) -> CompleteRequest:
    body: dict[str, Any] = {
        "purpose": "review",
        "user": "teacher-1",
        "messages": [{"role": "user", "content": "Review this question."}],
        "output_schema": {"name": "review", "json_schema": SCHEMA},
        "max_output_tokens": 500,
    }
    body.update(overrides)
    return CompleteRequest.model_validate(body)


async def expect_error(coro: Any, code: ErrorCode) -> ContractError:
    with pytest.raises(ContractError) as info:
        await coro
    assert info.value.code is code, info.value
    return info.value


async def test_structured_output_through_a_forced_tool(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(
        StubReply.tool({"findings": []}, usage={"input_tokens": 1000, "output_tokens": 200})
    )
    reply = await rig.gateway.complete(request(), trace_id="ab" * 16)
    assert reply.output == {"findings": []}
    assert reply.attempts == 1 and reply.model == "claude-sonnet-4-6"
    # Sonnet: 1000 × $3/MTok + 200 × $15/MTok = $0.006.
    assert reply.usage.cost_usd == Decimal("0.006")
    sent = rig.stub.requests[0].body
    assert sent["tool_choice"] == {"type": "tool", "name": "review"}
    assert sent["tools"][0]["input_schema"] == SCHEMA
    assert sent["max_tokens"] == 500 and sent["model"] == "claude-sonnet-4-6"
    [row] = await rig.repo.ledger_rows(call_id=reply.call_id)
    assert row["outcome"] == "ok" and row["cost_micros"] == 6000
    assert row["person"] == "teacher-1" and row["billed_to"] == "teacher-1"
    assert row["trace_id"] == "ab" * 16 and row["purpose"] == "review"
    assert row["reserved_micros"] >= row["cost_micros"]
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert (
        totals is not None
        and totals.spent_micros == 6000
        and totals.reserved_micros == await leased(rig.repo)
    )
    assert (
        rig.metric(
            "quiz_llm_gateway_calls_total",
            {"purpose": "review", "model": "claude-sonnet-4-6", "outcome": "ok"},
        )
        == 1
    )


async def test_free_text_when_no_schema(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(StubReply.text("Bonjour."))
    reply = await rig.gateway.complete(request(output_schema=None, purpose="assistant"))
    assert reply.output == "Bonjour."
    assert "tools" not in rig.stub.requests[0].body


async def test_poll_uses_haiku_and_bills_the_teacher(make_rig: Any) -> None:
    rig = make_rig()
    reply = await rig.gateway.complete(request(purpose="poll", user=None, billed_to="teacher-9"))
    assert reply.model == "claude-haiku-4-5"
    [row] = await rig.repo.ledger_rows(call_id=reply.call_id)
    assert row["person"] is None and row["billed_to"] == "teacher-9"


async def test_unreadable_reply_is_asked_once_more_with_what_was_wrong(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(
        StubReply.malformed_tool({"findings": [{"path": 3}]}),
        StubReply.tool({"findings": [{"path": "prompt", "message": "typo"}]}),
    )
    reply = await rig.gateway.complete(request())
    assert reply.attempts == 2
    assert reply.output == {"findings": [{"path": "prompt", "message": "typo"}]}
    second = rig.stub.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"][0]["type"] == "tool_use"
    feedback = second[2]["content"][0]
    assert feedback["type"] == "tool_result" and feedback["is_error"] is True
    assert "findings/0" in feedback["content"] and "message" in feedback["content"]
    rows = await rig.repo.ledger_rows(call_id=reply.call_id)
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "unreadable"), (2, "ok")]
    assert reply.usage.cost_usd == Decimal(sum(r["cost_micros"] for r in rows)) / 1_000_000
    assert rig.metric("quiz_llm_gateway_parse_failures_total", {"purpose": "review"}) == 1


async def test_unreadable_twice_is_llm_failed(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(StubReply.malformed_tool({"x": 1}), StubReply.text("no tool"))
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert len(rig.stub.requests) == 2
    assert rig.metric("quiz_llm_gateway_parse_failures_total", {"purpose": "review"}) == 2
    rows = await rig.repo.ledger_rows(purpose="review")
    assert [r["outcome"] for r in rows] == ["unreadable", "unreadable"]
    assert all(r["cost_micros"] > 0 for r in rows), "unreadable replies still cost"


async def test_provider_429_then_529_then_success(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(
        StubReply.error(429, retry_after=2), StubReply.error(529), StubReply.tool({"findings": []})
    )
    reply = await rig.gateway.complete(request())
    assert reply.attempts == 1 and len(rig.stub.requests) == 3
    assert rig.clock.slept[0] == 2, "the provider's retry-after is honoured"
    [row] = await rig.repo.ledger_rows(call_id=reply.call_id)
    assert row["provider_requests"] == 3 and row["outcome"] == "ok"
    assert rig.gateway.circuit.current(rig.clock.monotonic()) is CircuitState.closed


async def test_retries_are_bounded_then_llm_failed(make_rig: Any) -> None:
    rig = make_rig(provider_max_retries=2, circuit_failures=10)
    rig.stub.script(*[StubReply.error(500)] * 5)
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert len(rig.stub.requests) == 3
    [row] = await rig.repo.ledger_rows(purpose="review")
    assert row["outcome"] == "provider_error" and row["cost_micros"] == 0
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert (
        totals is not None
        and totals.reserved_micros == await leased(rig.repo)
        and totals.spent_micros == 0
    )


async def test_retry_stops_at_the_callers_deadline(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(StubReply.error(429, retry_after=30), StubReply.tool({"findings": []}))
    error = await expect_error(rig.gateway.complete(request(deadline_s=5)), ErrorCode.llm_failed)
    assert error.retry_after_s == 30
    assert len(rig.stub.requests) == 1


async def test_a_client_error_is_not_retried(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(StubReply.error(400, message="bad"))
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert len(rig.stub.requests) == 1


async def test_circuit_opens_fails_fast_and_closes_after_a_probe(make_rig: Any) -> None:
    rig = make_rig(circuit_failures=3, provider_max_retries=0, circuit_cooldown_s=30)
    rig.stub.script(*[StubReply.error(529)] * 3)
    for _ in range(3):
        await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert rig.gateway.circuit.current(rig.clock.monotonic()) is CircuitState.open
    availability = await rig.gateway.availability()
    assert not availability.available and availability.reason is ErrorCode.llm_failed
    assert availability.circuit == "open" and availability.retry_after_s == 30

    error = await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert error.retry_after_s == 30 and len(rig.stub.requests) == 3, "fails fast"
    assert rig.metric("quiz_llm_gateway_circuit_state") == 2

    rig.clock.now += 31
    assert (await rig.gateway.availability()).circuit == "half_open"
    rig.stub.script(StubReply.tool({"findings": []}))
    await rig.gateway.complete(request())
    assert rig.gateway.circuit.current(rig.clock.monotonic()) is CircuitState.closed
    assert (await rig.gateway.availability()).available


async def test_not_configured(make_rig: Any) -> None:
    rig = make_rig(configured=False)
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_not_configured)
    availability = await rig.gateway.availability()
    assert availability.reason is ErrorCode.llm_not_configured and not availability.available
    [row] = await rig.repo.ledger_rows(purpose="review")
    assert row["error_code"] == "llm_not_configured" and row["attempt"] == 0


async def test_invalid_schema_is_invalid_request(make_rig: Any) -> None:
    rig = make_rig()
    bad = request(output_schema={"name": "x", "json_schema": {"type": "array"}})
    await expect_error(rig.gateway.complete(bad), ErrorCode.invalid_request)
    assert rig.stub.requests == []


async def test_budget_exhausted_never_shrinks_the_hold(make_rig: Any) -> None:
    # $0.015 cap; a call may cost $0.0075 of output + its input bound: one fits, not two.
    rig = make_rig(daily_cap_usd=Decimal("0.015"))
    rig.stub.script(
        StubReply.tool({"findings": []}, usage={"input_tokens": 10, "output_tokens": 500})
    )
    await rig.gateway.complete(request())
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_budget_exhausted)
    assert len(rig.stub.requests) == 1
    # A smaller call still fits: the cap refuses by worst case, not by a blanket switch.
    rig.stub.script(
        StubReply.tool({"findings": []}, usage={"input_tokens": 10, "output_tokens": 10})
    )
    await rig.gateway.complete(request(max_output_tokens=20))
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.spent_micros <= totals.cap_micros == 15_000
    refusals = [r for r in await rig.repo.ledger_rows(purpose="review") if r["attempt"] == 0]
    assert [r["error_code"] for r in refusals] == ["llm_budget_exhausted"]


async def test_budget_exhausted_shows_in_availability(make_rig: Any) -> None:
    rig = make_rig(daily_cap_usd=Decimal("0"))
    availability = await rig.gateway.availability()
    assert availability.reason is ErrorCode.llm_budget_exhausted
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_budget_exhausted)


async def test_rate_limit_is_exact_at_10_and_11(make_rig: Any) -> None:
    rig = make_rig()
    start = rig.clock.now
    for i in range(10):
        rig.clock.now = start + i * 5  # t = 0, 5, …, 45
        await rig.gateway.complete(request(purpose="generate"))
    rig.clock.now = start + 50
    error = await expect_error(
        rig.gateway.complete(request(purpose="generate")), ErrorCode.rate_limited
    )
    # The first call (t=0) leaves the 60 s window at t=60: 10 s from t=50.
    assert error.retry_after_s == pytest.approx(10.0)
    # Another purpose and another teacher are not limited by it.
    await rig.gateway.complete(request(purpose="review"))
    await rig.gateway.complete(request(purpose="generate", user="teacher-2"))
    rig.clock.now = start + 59.999
    await expect_error(rig.gateway.complete(request(purpose="generate")), ErrorCode.rate_limited)
    rig.clock.now = start + 60
    await rig.gateway.complete(request(purpose="generate"))
    rig.clock.now = start + 60.5
    error = await expect_error(
        rig.gateway.complete(request(purpose="generate")), ErrorCode.rate_limited
    )
    assert error.retry_after_s == pytest.approx(4.5)


async def test_rate_limit_is_shared_across_replicas(make_rig: Any) -> None:
    clock = HandClock()
    one, two = make_rig(clock=clock), make_rig(clock=clock)
    calls = [
        (one if i % 2 else two).gateway.complete(request(purpose="generate")) for i in range(11)
    ]
    results = await asyncio.gather(*calls, return_exceptions=True)
    refused = [r for r in results if isinstance(r, ContractError)]
    assert len(refused) == 1 and refused[0].code is ErrorCode.rate_limited


async def test_scheduled_work_has_no_person_limit(make_rig: Any) -> None:
    rig = make_rig(rate_limits={"review": 1})
    for _ in range(3):
        await rig.gateway.complete(request(user=None))


async def test_day_boundary_across_the_autumn_dst_change(make_rig: Any) -> None:
    # 2026-10-25: Zurich falls back; that day ends at 23:00 UTC, not 22:00.
    clock = HandClock(datetime(2026, 10, 25, 22, 30, tzinfo=UTC).timestamp())
    rig = make_rig(clock=clock, daily_cap_usd=Decimal("0.015"))
    script = {"input_tokens": 10, "output_tokens": 500}
    rig.stub.script(*[StubReply.tool({"findings": []}, usage=script)] * 3)
    await rig.gateway.complete(request())
    assert rig.gateway.today() == date(2026, 10, 25)
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_budget_exhausted)
    # 22:59 UTC is still the 25th in Zurich (23:59 CET): the cap is still spent.
    clock.now = datetime(2026, 10, 25, 22, 59, tzinfo=UTC).timestamp()
    await expect_error(rig.gateway.complete(request()), ErrorCode.llm_budget_exhausted)
    # 23:00 UTC is midnight: a new day with a fresh cap.
    clock.now = datetime(2026, 10, 25, 23, 0, tzinfo=UTC).timestamp()
    assert rig.gateway.today() == date(2026, 10, 26)
    await rig.gateway.complete(request())
    first = await rig.repo.day_totals(date(2026, 10, 25))
    second = await rig.repo.day_totals(date(2026, 10, 26))
    assert first is not None and second is not None
    assert first.spent_micros > 0 and second.spent_micros > 0
    usage = await rig.gateway.usage(date(2026, 10, 25))
    assert usage.by_purpose[Purpose.review].total.calls == 1


async def test_usage_splits_person_and_no_person(make_rig: Any) -> None:
    rig = make_rig()
    usage = {"input_tokens": 100, "output_tokens": 100}
    rig.stub.script(*[StubReply.tool({"findings": []}, usage=usage)] * 3)
    await rig.gateway.complete(request(user=None))  # the night
    await rig.gateway.complete(request(user=None))
    await rig.gateway.complete(request(user="teacher-1"))  # "Review now"
    reply = await rig.gateway.usage(billed_to="teacher-1")
    review = reply.by_purpose[Purpose.review]
    one_call = Decimal("0.0018")  # 100 × 3 + 100 × 15 micro-dollars
    assert review.no_person.calls == 2 and review.no_person.cost_usd == 2 * one_call
    assert review.person.calls == 1 and review.person.cost_usd == one_call
    assert review.total.calls == 3
    assert reply.spent_usd == 3 * one_call
    assert reply.reserved_usd * 1_000_000 == await leased(rig.repo)
    assert reply.remaining_usd == reply.cap_usd - reply.spent_usd - reply.reserved_usd
    assert reply.billed_to_spend is not None
    assert reply.billed_to_spend[Purpose.review].cost_usd == one_call


async def test_usage_estimate_is_the_hold_admission_makes(make_rig: Any) -> None:
    """ADR-060 §5: the night sizes its share with the gateway's own worst case, and sees the
    open holds by purpose and person / no person."""
    rig = make_rig()
    night = request(user=None, system="You review.", max_output_tokens=700)
    teacher = request(purpose="generate", max_output_tokens=300)
    free_text = request(output_schema=None)
    before = await rig.gateway.usage(estimate=night)
    assert before.estimate_usd is not None and before.estimate_usd > 0
    assert all(h.person == h.no_person == 0 for h in before.held_by_purpose.values())
    assert (await rig.gateway.usage()).estimate_usd is None
    # Free text has no tool to send: a smaller prompt, a smaller worst case.
    text_estimate = (await rig.gateway.usage(estimate=free_text)).estimate_usd
    assert text_estimate is not None and text_estimate < before.estimate_usd

    rig.stub.script(
        StubReply.slow(1.0, StubReply.tool({"findings": []})),
        StubReply.slow(1.0, StubReply.tool({"findings": []})),
    )
    calls = [
        asyncio.create_task(rig.gateway.complete(night)),
        asyncio.create_task(rig.gateway.complete(teacher)),
    ]
    for _ in range(200):
        if len(rig.stub.requests) == 2:
            break
        await asyncio.sleep(0.01)
    during = await rig.gateway.usage(estimate=teacher)
    held = during.held_by_purpose
    assert held[Purpose.review].no_person == before.estimate_usd
    assert held[Purpose.review].person == 0
    assert held[Purpose.generate].person == during.estimate_usd
    assert held[Purpose.generate].no_person == 0
    # The teacher's hold is in this replica's slice of the cap (issue 24), the night's a row.
    slices = Decimal(await leased(rig.repo)) / 1_000_000
    assert during.reserved_usd == before.estimate_usd + slices
    assert await rig.repo.ledger_rows() == []  # nothing settled yet
    await asyncio.gather(*calls)
    after = await rig.gateway.usage()
    assert all(h.person == h.no_person == 0 for h in after.held_by_purpose.values())
    rows = await rig.repo.ledger_rows(purpose="review")
    assert Decimal(rows[0]["reserved_micros"]) / 1_000_000 == before.estimate_usd


async def test_request_id_is_idempotent(make_rig: Any) -> None:
    rig = make_rig()
    first, second = await asyncio.gather(
        rig.gateway.complete(request(request_id="r-1")),
        rig.gateway.complete(request(request_id="r-1")),
    )
    third = await rig.gateway.complete(request(request_id="r-1"))
    assert first.call_id == second.call_id == third.call_id
    assert len(rig.stub.requests) == 1


async def test_an_expired_hold_is_released_once(make_rig: Any) -> None:
    rig = make_rig()
    day = rig.gateway.today()
    held = Held("00000000-0000-0000-0000-000000000001", day, 5000)
    # The crashed call's late settle, written below.
    entry = LedgerRow(
        at=datetime.now(UTC),
        day=day,
        call_id="c",
        attempt=1,
        purpose="review",
        person=None,
        billed_to=None,
        model="claude-sonnet-4-6",
        effort="low",
        outcome="ok",
        input_tokens=1,
        output_tokens=1,
        cost_micros=18,
        reserved_micros=5000,
        provider_requests=1,
        latency_ms=1,
    )
    admission = await rig.repo.admit(
        held=held,
        call_id="c",
        request_id=None,
        purpose="review",
        has_person=False,
        cap_micros=rig.gateway.cap_micros,
        now=rig.clock.now,
        expires_at=rig.clock.now + 10,
        rate=None,
        refusal=entry.model_copy(update={"attempt": 0, "outcome": "refused", "cost_micros": 0}),
    )
    assert admission.admitted
    assert await rig.repo.release_expired(rig.clock.now) == 0
    assert await rig.repo.release_expired(rig.clock.now + 11) == 1
    totals = await rig.repo.day_totals(day)
    assert totals is not None and totals.reserved_micros == 0
    # The crashed call's late settle adds its spend but does not release the hold again.
    await rig.repo.settle(held, entry)
    totals = await rig.repo.day_totals(day)
    assert totals is not None and totals.reserved_micros == 0 and totals.spent_micros == 18


async def test_provider_span_carries_genai_attributes(make_rig: Any, spans: Any) -> None:
    rig = make_rig()
    rig.stub.script(
        StubReply.tool({"findings": []}, usage={"input_tokens": 120, "output_tokens": 30})
    )
    await rig.gateway.complete(request())
    [span] = [s for s in spans.get_finished_spans() if s.name == "chat claude-sonnet-4-6"]
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert attrs["gen_ai.request.max_tokens"] == 500
    assert attrs["gen_ai.usage.input_tokens"] == 120
    assert attrs["gen_ai.usage.output_tokens"] == 30
    assert attrs["quiz.llm.purpose"] == "review"


async def test_sweep_prunes_rate_events_of_every_key(make_rig: Any) -> None:
    rig = make_rig()
    for user in ("a", "b"):
        await rig.gateway.complete(request(purpose="generate", user=user))
    rig.clock.now += 61
    await rig.gateway.sweep()
    assert await rig.repo.prune_rate_events(rig.clock.now) == 0
