"""Structured output per model (domain.structured) through the real SDK against the stub, which
refuses a forced tool_choice to the models the real API refuses it to (Sonnet 5.5, Opus 5.5).

These rigs run the gateway's DEFAULT models (no PURPOSE_MODELS pin): claude-sonnet-5-5 for
review. The pinned rig (claude-sonnet-4-6) keeps the forced tool.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteRequest
from quiz_llm_gateway.call.provider import ProviderError
from quiz_testkit.anthropic_stub import StubReply

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
FINDING = {"path": "choices/0", "message": "Two choices say the same."}


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


@pytest.fixture(params=["lean", "sdk"])
def default_rig(make_rig: Any, request: pytest.FixtureRequest) -> Any:
    """A rig on the gateway's default models (purpose_models empty: the defaults apply)."""
    return make_rig(purpose_models={}, provider_path=request.param)


async def test_structured_call_on_the_default_model_goes_as_output_config(
    default_rig: Any,
) -> None:
    rig = default_rig
    rig.stub.script(StubReply.tool({"findings": [FINDING]}))
    reply = await rig.gateway.complete(request(), trace_id="ab" * 16)
    assert reply.model == "claude-sonnet-5-5" and reply.attempts == 1
    assert reply.output == {"findings": [FINDING]}
    [sent] = [r.body for r in rig.stub.requests]
    assert sent["model"] == "claude-sonnet-5-5"
    assert sent["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA}
    assert "tools" not in sent and "tool_choice" not in sent
    [row] = await rig.repo.ledger_rows(call_id=reply.call_id)
    assert row["outcome"] == "ok" and row["cost_micros"] > 0


async def test_an_unreadable_json_reply_is_asked_once_more_with_the_problem(
    default_rig: Any,
) -> None:
    rig = default_rig
    # Valid JSON against the wrong shape, then the right answer.
    rig.stub.script(
        StubReply.malformed_tool({"findings": "none"}), StubReply.tool({"findings": []})
    )
    reply = await rig.gateway.complete(request())
    assert reply.output == {"findings": []} and reply.attempts == 2
    first, second = (r.body for r in rig.stub.requests)
    assert "tools" not in second and second["output_config"] == first["output_config"]
    assistant, feedback = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert json.loads(assistant["content"][0]["text"]) == {"findings": "none"}
    assert feedback["role"] == "user"
    problem = feedback["content"][0]["text"]
    assert "did not match the schema" in problem and "findings" in problem
    outcomes = [r["outcome"] for r in await rig.repo.ledger_rows(call_id=reply.call_id)]
    assert sorted(outcomes) == ["ok", "unreadable"]


async def test_a_reply_that_is_not_json_is_retried_then_fails_twice(default_rig: Any) -> None:
    rig = default_rig
    rig.stub.script(StubReply.text("Here are my findings: none."), StubReply.text("[]"))
    with pytest.raises(ContractError) as info:
        await rig.gateway.complete(request())
    assert info.value.code is ErrorCode.llm_failed
    assert "unreadable twice" in info.value.message
    _, second = (r.body for r in rig.stub.requests)
    assert "not valid JSON" in second["messages"][-1]["content"][0]["text"]


async def test_the_stub_refuses_a_forced_tool_to_sonnet_5_5(make_rig: Any) -> None:
    """The guard of the tests above: pinned to the forced tool's shape (an older gateway),
    a call to claude-sonnet-5-5 is refused 400 by the stub, as by the real API."""
    rig = make_rig(purpose_models={})
    provider = rig.gateway.attempts.provider.provider
    with pytest.raises(ProviderError) as info:
        await provider._create_lean(
            {
                "model": "claude-sonnet-5-5",
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"name": "review", "input_schema": SCHEMA}],
                "tool_choice": {"type": "tool", "name": "review"},
            },
            5.0,
        )
    assert info.value.status == 400
    assert "not supported for this model" in str(info.value)


async def test_the_pinned_rig_keeps_the_forced_tool(make_rig: Any) -> None:
    rig = make_rig()  # PURPOSE_MODELS pinned to claude-sonnet-4-6
    rig.stub.script(StubReply.tool({"findings": []}))
    reply = await rig.gateway.complete(request())
    assert reply.model == "claude-sonnet-4-6" and reply.output == {"findings": []}
    [sent] = [r.body for r in rig.stub.requests]
    assert sent["tool_choice"] == {"type": "tool", "name": "review"}
    assert sent["tools"][0]["input_schema"] == SCHEMA
    assert "format" not in sent.get("output_config", {})


async def test_prompt_cache_marks_the_system_prompt_on_the_json_schema_path(
    default_rig: Any,
) -> None:
    """Sonnet 5.5's minimum is 512 tokens: a 2,600-byte system prompt (650 estimated) is
    marked, on the system block since no tools are sent; the second call reads it."""
    rig = default_rig
    system = "You review quiz questions for a teacher. " * 64
    rig.stub.script(StubReply.tool({"findings": []}), StubReply.tool({"findings": []}))
    first = await rig.gateway.complete(request(system=system))
    second = await rig.gateway.complete(request(system=system))
    sent = [r.body for r in rig.stub.requests]
    for body in sent:
        assert body["system"] == [
            {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        ]
        assert "tools" not in body
    assert first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
