"""The OpenAI chat-completions stub, driven through the real `openai` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest

from quiz_testkit.openai_stub import ChatReply, OpenAIStub

pytestmark = pytest.mark.integration

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "choices": {"type": "array", "minItems": 2, "items": {"type": "string", "minLength": 1}},
        "level": {"enum": ["easy", "hard"]},
    },
    "required": ["choices", "level"],
}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "propose", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
]
FORCE: Any = {"type": "function", "function": {"name": "propose"}}
MESSAGES: list[Any] = [{"role": "user", "content": "Propose choices for 2 + 2."}]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIStub]:
    with OpenAIStub(api_key="sk-test") as stub:
        yield stub


@pytest.fixture
def stub(server: OpenAIStub) -> Iterator[OpenAIStub]:
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def client(stub: OpenAIStub) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def test_a_forced_function_call_answers_a_schema_valid_instance(
    stub: OpenAIStub, client: openai.OpenAI
) -> None:
    out = client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, tool_choice=FORCE, max_tokens=100
    )
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and calls[0].type == "function"
    assert calls[0].function.name == "propose"
    jsonschema.validate(json.loads(calls[0].function.arguments), SCHEMA)
    assert out.usage is not None and out.usage.prompt_tokens > 0
    assert out.usage.completion_tokens > 0
    assert stub.requests[0].body["tool_choice"] == FORCE
    assert stub.requests[0].headers["authorization"] == "Bearer sk-test"


def test_response_format_json_schema_answers_the_object_as_text(client: openai.OpenAI) -> None:
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "propose", "schema": SCHEMA}}
    out = client.chat.completions.create(model="m", messages=MESSAGES, response_format=fmt)
    assert out.choices[0].finish_reason == "stop"
    assert out.choices[0].message.tool_calls is None
    jsonschema.validate(json.loads(out.choices[0].message.content or ""), SCHEMA)


def test_scripted_replies_come_in_order_with_their_usage_and_finish_reason(
    stub: OpenAIStub, client: openai.OpenAI
) -> None:
    stub.script(
        ChatReply.call({"choices": ["4"]}, {"prompt_tokens": 7, "completion_tokens": 3}),
        ChatReply.call('{"choices": ["4", "5"', finish_reason="length"),
        ChatReply.text("Four.", finish_reason="length"),
    )
    first = client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, tool_choice=FORCE
    )
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (7, 3)
    assert first.usage.total_tokens == 10
    cut = client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, tool_choice=FORCE
    )
    assert cut.choices[0].finish_reason == "length"
    calls = cut.choices[0].message.tool_calls
    assert calls is not None and calls[0].function.arguments == '{"choices": ["4", "5"'
    text = client.chat.completions.create(model="m", messages=MESSAGES)
    assert (text.choices[0].message.content, text.choices[0].finish_reason) == ("Four.", "length")
    assert stub.pending == 0


def test_a_429_carries_retry_after_and_openais_error_body(
    stub: OpenAIStub, client: openai.OpenAI
) -> None:
    stub.script(ChatReply.error(429, retry_after=2.5, message="slow down"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "2.5"
    assert isinstance(caught.value.body, dict) and caught.value.body["message"] == "slow down"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_the_sdks_internal_server_error(
    stub: OpenAIStub, client: openai.OpenAI, status: int
) -> None:
    stub.script(ChatReply.error(status))
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert caught.value.status_code == status


def test_a_wrong_key_is_refused(stub: OpenAIStub) -> None:
    with openai.OpenAI(base_url=stub.base_url, api_key="wrong", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError):
            c.chat.completions.create(model="m", messages=MESSAGES)
    assert stub.requests == []


def test_a_slow_reply_times_the_client_out(stub: OpenAIStub) -> None:
    stub.script(ChatReply.slow(2.0, ChatReply.text("late")))
    with openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0, timeout=0.2) as c:
        with pytest.raises(openai.APITimeoutError):
            c.chat.completions.create(model="m", messages=MESSAGES)


def test_a_request_without_messages_is_refused_without_eating_the_script(
    stub: OpenAIStub, client: openai.OpenAI
) -> None:
    stub.script(ChatReply.text("kept"))
    with pytest.raises(openai.BadRequestError):
        client.post("/chat/completions", body={"model": "m"}, cast_to=object)
    assert stub.pending == 1
