"""One log line per call, failures included, never the prompt (issue 10, item 9)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_testkit.anthropic_stub import StubReply

from .test_gateway import expect_error, request

SECRET = "Review this secret question about Zanzibar."


def call_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("llm call ")]


async def test_one_line_per_call_with_its_facts_and_never_the_prompt(
    make_rig: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quiz_llm_gateway")
    rig = make_rig(provider_max_retries=1, rate_limits={"review": 2})
    body = {"messages": [{"role": "user", "content": SECRET}], "system": "Secret system."}
    rig.stub.script(
        StubReply.tool({"findings": []}, usage={"input_tokens": 100, "output_tokens": 10})
    )
    reply = await rig.gateway.complete(request(**body))
    rig.stub.script(StubReply.error(529), StubReply.error(529))  # an outage: llm_failed
    await expect_error(rig.gateway.complete(request(**body)), ErrorCode.llm_failed)
    await expect_error(rig.gateway.complete(request(**body)), ErrorCode.rate_limited)

    ok, failed, limited = call_lines(caplog)
    text = ok.getMessage()
    assert ok.levelno == logging.INFO
    for part in (
        "purpose=review",
        "model=claude-sonnet-4-6",
        "outcome=ok",
        "attempts=1",
        "requests=1",
        f"cost_usd={reply.usage.cost_usd}",
        "latency_ms=",
        f"call_id={reply.call_id}",
    ):
        assert part in text, (part, text)
    assert failed.levelno == logging.WARNING
    assert "outcome=llm_failed" in failed.getMessage() and "requests=2" in failed.getMessage()
    assert limited.levelno == logging.WARNING and "outcome=rate_limited" in limited.getMessage()
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert "Zanzibar" not in everything and "Secret system" not in everything
