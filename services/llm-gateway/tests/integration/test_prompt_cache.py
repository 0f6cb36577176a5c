"""Prompt caching (issue 31 point 2) end to end: the gateway, the real SDK's configuration and
aiohttp against the testkit's stub (which reports caching as Anthropic does), a real database."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from quiz_contracts.llm import CompleteRequest
from quiz_llm_gateway.domain.pricing import DEFAULT_PRICES
from quiz_llm_gateway.domain.prompt_cache import EPHEMERAL, cached_cost_micros
from quiz_testkit.anthropic_stub import StubReply

from .conftest import leased

SONNET = DEFAULT_PRICES["claude-sonnet-4-6"]
SCHEMA = {
    "type": "object",
    "properties": {"findings": {"type": "array", "items": {"type": "string"}}},
    "required": ["findings"],
}
# 6,000 bytes: 1,500 tokens by the gateway's estimate, over Sonnet's 1,024 and under Haiku's 4,096.
RULES = "Report only what is wrong with the question, never its style. " * 96


def request(question: str, **overrides: Any) -> CompleteRequest:
    body: dict[str, Any] = {
        "purpose": "review",
        "user": None,
        "system": RULES,
        "messages": [{"role": "user", "content": question}],
        "output_schema": {"name": "report", "json_schema": SCHEMA},
        "max_output_tokens": 500,
    }
    body.update(overrides)
    return CompleteRequest.model_validate(body)


async def test_a_long_stable_prefix_is_written_once_then_read_and_billed_so(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.default = StubReply.tool({"findings": []})
    first = await rig.gateway.complete(request("Question one: 2 + 2 = 5?"))
    second = await rig.gateway.complete(request("Another question, a little longer: 3 × 3 = 6?"))
    sent = [r.body for r in rig.stub.requests]
    # The system prompt goes as one text block carrying the breakpoint (tools come before it,
    # so both are cached); the question after it, unmarked.
    for body in sent:
        assert body["system"] == [{"type": "text", "text": RULES, "cache_control": EPHEMERAL}]
        assert "cache_control" not in body["tools"][0]
        assert isinstance(body["messages"][0]["content"], str)
    assert sent[0]["system"] == sent[1]["system"] and sent[0]["tools"] == sent[1]["tools"]

    u1, u2 = first.usage, second.usage
    assert u1.cache_creation_input_tokens > 1024 and u1.cache_read_input_tokens == 0
    assert u2.cache_read_input_tokens == u1.cache_creation_input_tokens
    assert u2.cache_creation_input_tokens == 0
    rows = [(await rig.repo.ledger_rows(call_id=r.call_id))[0] for r in (first, second)]
    for reply, row in zip((first, second), rows, strict=True):
        u = reply.usage
        # input_tokens counts every input token; the cache columns say how many of them were
        # read or written, and the cost prices them at 0.1 × and 1.25 ×.
        assert row["input_tokens"] == u.input_tokens
        assert row["cache_read_input_tokens"] == u.cache_read_input_tokens
        assert row["cache_creation_input_tokens"] == u.cache_creation_input_tokens
        cost = cached_cost_micros(
            SONNET,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
        )
        assert row["cost_micros"] == cost and u.cost_usd == Decimal(cost) / 1_000_000
        # The hold never counted on a read: it covers the write premium too.
        assert row["reserved_micros"] >= SONNET.cost_micros(u.input_tokens, u.output_tokens)
        assert row["reserved_micros"] >= row["cost_micros"]
    # The read call is billed well under the price of its tokens uncached.
    assert rows[1]["cost_micros"] < SONNET.cost_micros(u2.input_tokens, u2.output_tokens) / 2
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None
    assert totals.spent_micros == rows[0]["cost_micros"] + rows[1]["cost_micros"]
    assert totals.reserved_micros == await leased(rig.repo)
    read = {"model": "claude-sonnet-4-6", "kind": "read"}
    write = {"model": "claude-sonnet-4-6", "kind": "write"}
    assert rig.metric("quiz_llm_gateway_cache_tokens_total", read) == u2.cache_read_input_tokens
    assert (
        rig.metric("quiz_llm_gateway_cache_tokens_total", write) == u1.cache_creation_input_tokens
    )


async def test_the_estimate_is_the_hold_with_the_write_premium(make_rig: Any) -> None:
    rig = make_rig()
    long_req, short_req = request("Q?"), request("Q?", system="Short rules.")
    estimate = rig.gateway.estimate_micros(long_req)
    rig.stub.default = StubReply.tool({"findings": []})
    reply = await rig.gateway.complete(long_req)
    [row] = await rig.repo.ledger_rows(call_id=reply.call_id)
    # The night's estimate (ADR-060 §5) is exactly what admission held, premium included.
    assert row["reserved_micros"] == estimate
    # The same prompt without a cacheable prefix holds a quarter of the prefix less.
    plain = rig.gateway.estimate_micros(short_req)
    assert estimate > plain


async def test_nothing_is_marked_under_the_models_minimum(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.default = StubReply.tool({"findings": []})
    # Short rules: under Sonnet's minimum. Haiku (the poll's model) needs 4,096 tokens.
    await rig.gateway.complete(request("Q1?", system="Short rules."))
    await rig.gateway.complete(request("Q2?", purpose="poll", billed_to="teacher-1"))
    for body in (r.body for r in rig.stub.requests):
        assert isinstance(body["system"], str)
        assert all("cache_control" not in tool for tool in body["tools"])


async def test_prompt_caching_can_be_turned_off(make_rig: Any) -> None:
    rig = make_rig(prompt_cache=False)
    rig.stub.default = StubReply.tool({"findings": []})
    first = await rig.gateway.complete(request("Q1?"))
    second = await rig.gateway.complete(request("Q2?"))
    assert all(isinstance(r.body["system"], str) for r in rig.stub.requests)
    for reply in (first, second):
        assert reply.usage.cache_read_input_tokens == reply.usage.cache_creation_input_tokens == 0
        u = reply.usage
        assert u.cost_usd == Decimal(SONNET.cost_micros(u.input_tokens, u.output_tokens)) / 10**6
