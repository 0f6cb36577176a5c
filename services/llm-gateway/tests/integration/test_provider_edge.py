"""The provider's edge: cut replies, junk 200s, lone surrogates, retry-after (issue 10, 1/2/5/6).

Real SDK against the scripted stub, real database (SQLite, and PostgreSQL when it answers).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_testkit.anthropic_stub import StubReply

from .conftest import leased
from .test_gateway import expect_error, request

JSON = {"content-type": "application/json"}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6"}
OPEN_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}}


def message_body(content: list[dict[str, Any]], **extra: Any) -> str:
    """A Messages API reply as raw JSON text (so escapes like \\ud800 reach the SDK as sent)."""
    body = {
        **MESSAGE,
        "content": content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 100, "output_tokens": 10},
        **extra,
    }
    return json.dumps(body)  # ensure_ascii: a lone surrogate travels as the escape "\ud800"


# -- 1. stop_reason ----------------------------------------------------------------------------


@pytest.mark.parametrize("schema", ["required", "open"])
async def test_a_structured_reply_cut_by_max_tokens_fails_without_a_same_budget_retry(
    make_rig: Any, schema: str
) -> None:
    rig = make_rig()
    overrides: dict[str, Any] = {}
    if schema == "open":  # `{}` would pass this schema: the cut must be caught by stop_reason
        overrides["output_schema"] = {"name": "note", "json_schema": OPEN_SCHEMA}
    rig.stub.script(
        StubReply.tool(
            {}, usage={"input_tokens": 100, "output_tokens": 500}, stop_reason="max_tokens"
        )
    )
    error = await expect_error(rig.gateway.complete(request(**overrides)), ErrorCode.llm_failed)
    assert "max_output_tokens=500" in error.message and "too small" in error.message
    assert len(rig.stub.requests) == 1, "never re-asked with the same budget"
    [row] = await rig.repo.ledger_rows()
    assert row["outcome"] == "cut" and row["cost_micros"] == 100 * 3 + 500 * 15
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.spent_micros == row["cost_micros"]
    assert totals.reserved_micros == await leased(rig.repo)


async def test_a_free_text_reply_carries_its_stop_reason(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(
        StubReply.text("The answer is", stop_reason="max_tokens"), StubReply.text("Complete.")
    )
    cut = await rig.gateway.complete(request(output_schema=None))
    assert cut.output == "The answer is" and cut.stop_reason == "max_tokens"
    whole = await rig.gateway.complete(request(output_schema=None))
    assert whole.stop_reason == "end_turn"
    structured = await rig.gateway.complete(request())
    assert structured.stop_reason == "tool_use"


# -- 2. junk 200 -------------------------------------------------------------------------------

JUNK = {
    "html": ("<html><body>Bad gateway</body></html>", {"content-type": "text/html"}),
    "error_body": ('{"type":"error","error":{"type":"api_error","message":"x"}}', JSON),
    "empty_object": ("{}", JSON),
    "no_usage": (
        json.dumps({**MESSAGE, "content": [{"type": "text", "text": "hi"}], "stop_reason": "x"}),
        JSON,
    ),
    "not_json": ("this is not json", JSON),
}


@pytest.mark.parametrize("junk", sorted(JUNK))
async def test_a_junk_200_is_a_provider_failure_retried(make_rig: Any, junk: str) -> None:
    rig = make_rig()
    body, headers = JUNK[junk]
    rig.stub.script(StubReply.raw(200, body, headers=headers), StubReply.tool({"findings": []}))
    reply = await rig.gateway.complete(request())
    assert reply.output == {"findings": []}
    assert len(rig.stub.requests) == 2
    [row] = await rig.repo.ledger_rows()
    assert row["outcome"] == "ok" and row["provider_requests"] == 2
    assert (
        rig.metric(
            "quiz_llm_gateway_provider_requests_total",
            {"model": "claude-sonnet-4-6", "status": "bad_response"},
        )
        == 1
    )


async def test_junk_replies_release_their_holds_at_once_and_open_the_circuit(
    make_rig: Any,
) -> None:
    # A $0.03 cap fits about three holds of this request: four leaked holds would block it.
    rig = make_rig(daily_cap_usd=Decimal("0.03"), provider_max_retries=0, circuit_failures=5)
    for name in ("html", "error_body", "empty_object", "no_usage"):
        body, headers = JUNK[name]
        rig.stub.script(StubReply.raw(200, body, headers=headers))
        await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert (
        totals is not None
        and totals.reserved_micros == await leased(rig.repo)
        and totals.spent_micros == 0
    )
    rows = await rig.repo.ledger_rows()
    assert [r["outcome"] for r in rows] == ["provider_error"] * 4
    assert all(r["error_code"] == "llm_failed" for r in rows)
    rig.stub.script(StubReply.tool({"findings": []}))
    assert (await rig.gateway.complete(request())).output == {"findings": []}
    # The circuit counts junk as failures: five in a row open it.
    for _ in range(5):
        rig.stub.script(StubReply.raw(200, "{}", headers=JSON))
        await expect_error(rig.gateway.complete(request()), ErrorCode.llm_failed)
    assert (await rig.gateway.availability()).circuit == "open"


# -- 5. lone surrogates ------------------------------------------------------------------------


async def test_lone_surrogates_are_replaced_and_the_call_settled(make_rig: Any) -> None:
    rig = make_rig()
    tool = {"type": "tool_use", "id": "toolu_1", "name": "review"}
    rig.stub.script(
        StubReply.raw(
            200,
            message_body(
                [{**tool, "input": {"findings": [{"path": "a\ud800", "message": "\udfff"}]}}],
                stop_reason="tool_use",
            ),
            headers=JSON,
        ),
        StubReply.raw(
            200, message_body([{"type": "text", "text": "ok \ud83d then \ud800"}]), headers=JSON
        ),
    )
    structured = await rig.gateway.complete(request())
    assert structured.output == {"findings": [{"path": "a\ufffd", "message": "\ufffd"}]}
    text = await rig.gateway.complete(request(output_schema=None))
    assert text.output == "ok \ufffd then \ufffd"
    for reply in (structured, text):
        reply.model_dump_json()  # serialisable: the caller gets its reply, not `internal`
    rows = await rig.repo.ledger_rows()
    assert [r["outcome"] for r in rows] == ["ok", "ok"]
    assert all(r["cost_micros"] == 100 * 3 + 10 * 15 for r in rows)


# -- 6. retry-after ----------------------------------------------------------------------------


@pytest.mark.parametrize("retry_after", [math.nan, math.inf, -5.0, 99999.0])
async def test_retry_after_is_clamped(make_rig: Any, retry_after: float) -> None:
    rig = make_rig(provider_max_retries=3)
    started = rig.clock.now
    rig.stub.script(*[StubReply.error(429, retry_after=retry_after)] * 4)
    error = await expect_error(rig.gateway.complete(request(deadline_s=6)), ErrorCode.llm_failed)
    assert all(math.isfinite(s) and 0 <= s <= 32 for s in rig.clock.slept), rig.clock.slept
    assert rig.clock.now - started <= 6, "never past the caller's deadline"
    assert error.retry_after_s is None or 0 <= error.retry_after_s <= 60
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.reserved_micros == await leased(rig.repo)


# -- 8. effort ---------------------------------------------------------------------------------


async def test_effort_is_sent_where_the_model_supports_it(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.effort_levels = {"claude-sonnet-4-6": ["low", "medium", "high"]}
    await rig.gateway.complete(request(effort="medium"))
    await rig.gateway.complete(request(purpose="poll", user=None, billed_to="t", effort="high"))
    sonnet, haiku = rig.stub.requests
    assert sonnet.body["model"] == "claude-sonnet-4-6"
    assert sonnet.body["output_config"] == {"effort": "medium"}
    assert haiku.body["model"] == "claude-haiku-4-5"
    assert "output_config" not in haiku.body  # Haiku 4.5 reports no effort levels
    rows = await rig.repo.ledger_rows()
    assert [r["effort"] for r in rows] == ["medium", "high"]
