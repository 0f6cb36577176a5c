"""The OpenAI-compatible provider through the real `openai` SDK against the test kit's stub.

Every outcome maps to the ProviderReply / ProviderError the Anthropic provider gives, so the
gateway's retries, circuit and deadlines treat both alike (issue 31, point 3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from quiz_llm_gateway.call.openai_compat import OpenAICompatProvider
from quiz_llm_gateway.call.provider import ProviderError
from quiz_llm_gateway.domain.output import forced_tool
from quiz_testkit.openai_stub import ChatReply, OpenAIStub

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [forced_tool("count", SCHEMA, None)]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Count to three."}]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub(api_key="sk-local") as stub:
        yield stub


@pytest.fixture
def stub(server: OpenAIStub) -> Iterator[OpenAIStub]:
    server.reset()
    yield server
    server.reset()


@pytest.fixture
async def provider(stub: OpenAIStub) -> AsyncIterator[OpenAICompatProvider]:
    p = OpenAICompatProvider(stub.base_url, "sk-local", 5.0)
    yield p
    await p.close()


async def create(provider: OpenAICompatProvider, **overrides: Any) -> Any:
    args: dict[str, Any] = {
        "model": "openai-compat/llama3",
        "system": "Be exact.",
        "messages": MESSAGES,
        "tools": TOOLS,
        "max_tokens": 64,
        "timeout_s": 5.0,
        "purpose": "generate",
        **overrides,
    }
    return await provider.create(**args)


async def test_a_forced_call_is_read_as_a_tool_use_with_the_servers_usage(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    stub.script(ChatReply.call({"n": 3}, {"prompt_tokens": 40, "completion_tokens": 6}))
    reply = await create(provider)
    assert reply.content[0]["type"] == "tool_use" and reply.content[0]["input"] == {"n": 3}
    assert (reply.input_tokens, reply.output_tokens) == (40, 6)
    assert reply.stop_reason == "tool_use" and reply.model == "openai-compat/llama3"
    [sent] = stub.requests
    assert sent.body["model"] == "llama3", "the prefix is the gateway's, not the server's"
    assert sent.body["tool_choice"] == {"type": "function", "function": {"name": "count"}}
    assert sent.body["messages"][0] == {"role": "system", "content": "Be exact."}
    assert sent.body["max_tokens"] == 64
    assert sent.headers["authorization"] == "Bearer sk-local"


async def test_json_schema_mode_sends_response_format_and_reads_the_text(
    stub: OpenAIStub,
) -> None:
    provider = OpenAICompatProvider(stub.base_url, "sk-local", 5.0, structured="json_schema")
    try:
        stub.script(ChatReply.call({"n": 2}))
        reply = await create(provider)
    finally:
        await provider.close()
    assert reply.content == [
        {"type": "tool_use", "id": "json_schema_output", "name": "count", "input": {"n": 2}}
    ]
    assert stub.requests[0].body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "tools" not in stub.requests[0].body


async def test_finish_reason_length_is_the_cut_stop_reason(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    stub.script(ChatReply.call('{"n": ', finish_reason="length"))
    reply = await create(provider)
    assert reply.stop_reason == "max_tokens"
    # llama-cpp-python's server says `tool_calls` for a call cut mid-arguments: the whole
    # budget spent is read as cut all the same.
    stub.script(ChatReply.call('{"n":', {"completion_tokens": 64}, finish_reason="tool_calls"))
    assert (await create(provider)).stop_reason == "max_tokens"
    stub.script(ChatReply.call({"n": 1}, {"completion_tokens": 63}))
    assert (await create(provider)).stop_reason == "tool_use"
    stub.script(ChatReply.text("One, two", finish_reason="length"))
    text = await create(provider, tools=None)
    assert text.content == [{"type": "text", "text": "One, two"}]
    assert text.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("reply", "status", "retryable", "outage", "retry_after"),
    [
        (ChatReply.error(429, retry_after=3, message="slow down"), 429, True, False, 3.0),
        (ChatReply.error(500), 500, True, True, None),
        (ChatReply.error(503, retry_after=1), 503, True, True, 1.0),
        (ChatReply.error(400, message="bad schema"), 400, False, False, None),
    ],
)
async def test_error_statuses_are_sorted_as_the_anthropic_providers(
    stub: OpenAIStub,
    provider: OpenAICompatProvider,
    reply: ChatReply,
    status: int,
    retryable: bool,
    outage: bool,
    retry_after: float | None,
) -> None:
    stub.script(reply)
    with pytest.raises(ProviderError) as caught:
        await create(provider)
    e = caught.value
    assert (e.status, e.retryable, e.outage, e.retry_after_s) == (
        status,
        retryable,
        outage,
        retry_after,
    )
    assert e.kind == str(status)
    if reply.message:
        assert str(e) == f"{status}: {reply.message}"
    assert len(stub.requests) == 1, "the SDK's own retries are off"


async def test_a_wrong_key_is_final(stub: OpenAIStub) -> None:
    provider = OpenAICompatProvider(stub.base_url, None, 5.0)
    try:
        with pytest.raises(ProviderError) as caught:
            await create(provider)
    finally:
        await provider.close()
    assert caught.value.status == 401 and not caught.value.retryable


async def test_a_timeout_and_an_unreachable_server_are_retryable_outages(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    stub.script(ChatReply.slow(3.0, ChatReply.text("late")))
    with pytest.raises(ProviderError) as caught:
        await create(provider, timeout_s=0.3)
    assert caught.value.kind == "timeout" and caught.value.retryable and caught.value.outage
    nowhere = OpenAICompatProvider("http://127.0.0.1:9/v1", None, 2.0)
    try:
        with pytest.raises(ProviderError) as caught:
            await create(nowhere)
    finally:
        await nowhere.close()
    assert caught.value.kind == "connection" and caught.value.retryable and caught.value.outage


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "x", "object": "chat.completion", "choices": []}',
        '{"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "a"}}]}',
        "<html>gateway</html>",
    ],
)
async def test_a_200_that_is_not_a_billable_completion_is_a_bad_response(
    stub: OpenAIStub, provider: OpenAICompatProvider, body: str
) -> None:
    stub.script(ChatReply.raw(200, body, headers={"content-type": "application/json"}))
    with pytest.raises(ProviderError) as caught:
        await create(provider)
    assert caught.value.kind == "bad_response" and caught.value.retryable
