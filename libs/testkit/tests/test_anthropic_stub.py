"""The Anthropic stub, driven through the real `anthropic` SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest

from quiz_testkit.anthropic_stub import (
    AnthropicStub,
    StubReply,
    minimal_instance,
    realistic_instance,
)

pytestmark = pytest.mark.integration

MODEL = "claude-test"

CHOICES_TOOL: dict[str, Any] = {
    "name": "propose_choices",
    "description": "Propose answer choices.",
    "input_schema": {
        "type": "object",
        "properties": {
            "choices": {
                "type": "array",
                "minItems": 2,
                "uniqueItems": True,
                "items": {"$ref": "#/$defs/Choice"},
            },
            "difficulty": {"enum": ["easy", "medium", "hard"]},
            "version": {"const": 1},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "rationale": {"anyOf": [{"type": "string", "minLength": 3}, {"type": "null"}]},
            "notes": {"type": "string"},
        },
        "required": ["choices", "difficulty", "version", "confidence", "rationale"],
        "additionalProperties": False,
        "$defs": {
            "Choice": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 200},
                    "correct": {"type": "boolean"},
                    "weight": {"type": "integer", "exclusiveMinimum": 0, "maximum": 10},
                    "id": {"type": "string", "format": "uuid"},
                },
                "required": ["text", "correct", "weight"],
            }
        },
    },
}
OTHER_TOOL: dict[str, Any] = {
    "name": "other",
    "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def stub() -> Iterator[AnthropicStub]:
    """One stub server for the module."""
    server = AnthropicStub(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh(stub: AnthropicStub) -> None:
    stub.reset()


@pytest.fixture
def client(stub: AnthropicStub) -> Iterator[anthropic.Anthropic]:
    """A sync SDK client without retries."""
    with anthropic.Anthropic(api_key="test", base_url=stub.base_url, max_retries=0) as c:
        yield c


def _forced(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    return client.messages.create(
        model=MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "Make choices."}],
        tools=[OTHER_TOOL, CHOICES_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "propose_choices"},
        **kwargs,
    )


def _text(client: anthropic.Anthropic, content: str = "hello") -> anthropic.types.Message:
    return client.messages.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": content}]
    )


def test_forced_tool_returns_scripted_input(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    scripted = {"choices": [{"text": "Paris", "correct": True, "weight": 1}]}
    stub.script(StubReply.tool(scripted))

    raw = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "Make choices."}],
        tools=[OTHER_TOOL, CHOICES_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "propose_choices"},
    )
    message = raw.parse()

    assert raw.headers["request-id"].startswith("req_")
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    block = message.content[0]
    assert block.type == "tool_use"
    assert block.id.startswith("toolu_")
    assert block.name == "propose_choices"
    assert block.input == scripted
    assert message.usage.input_tokens >= 1
    assert message.usage.output_tokens >= 1


def test_auto_produces_valid_minimal_instance(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    message = _forced(client)

    block = message.content[0]
    assert block.type == "tool_use"
    assert block.name == "propose_choices"
    jsonschema.Draft202012Validator(
        CHOICES_TOOL["input_schema"], format_checker=jsonschema.FormatChecker()
    ).validate(block.input)
    assert len(block.input["choices"]) == 2  # type: ignore[index]
    assert "notes" not in block.input  # type: ignore[operator]


def test_minimal_instance_edge_cases() -> None:
    schemas: list[dict[str, Any]] = [
        {"type": "integer", "exclusiveMinimum": 5, "multipleOf": 4},
        {"type": "number", "exclusiveMaximum": 0},
        {"type": "integer", "maximum": -3},
        {"type": ["string", "null"], "minLength": 2},
        {
            "allOf": [
                {"$ref": "#/$defs/A"},
                {"required": ["b"], "properties": {"b": {"const": 2}}},
            ],
            "$defs": {
                "A": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}
            },
        },
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "minItems": 3,
            "uniqueItems": True,
        },
        {
            "type": "object",
            "properties": {"when": {"type": "string", "format": "date-time"}},
            "required": ["when"],
        },
    ]
    for schema in schemas:
        jsonschema.validate(minimal_instance(schema), schema)
    assert minimal_instance({"type": "object", "properties": {"a": {"type": "string"}}}) == {}


def test_auto_without_forced_tool_is_text_and_structured_output_is_json(
    client: anthropic.Anthropic,
) -> None:
    assert _text(client).content[0].type == "text"

    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "minLength": 1}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "json please"}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    block = message.content[0]
    assert block.type == "text"
    jsonschema.validate(json.loads(block.text), schema)


def test_text_reply_and_usage_override(stub: AnthropicStub, client: anthropic.Anthropic) -> None:
    stub.script(StubReply.text("hi", usage={"input_tokens": 11, "output_tokens": 7}))
    stub.script(StubReply.text("cut", stop_reason="max_tokens"))

    first = _text(client)
    second = _text(client)

    assert first.content[0].type == "text"
    assert first.content[0].text == "hi"
    assert first.stop_reason == "end_turn"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (11, 7)
    assert second.stop_reason == "max_tokens"


def test_rate_limit_raises_with_retry_after(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    stub.script(StubReply.error(429, retry_after=0.1))

    with pytest.raises(anthropic.RateLimitError) as caught:
        _text(client)

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "0.1"
    assert caught.value.type == "rate_limit_error"
    assert caught.value.request_id is not None


def test_overloaded_is_a_529_internal_server_error(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    stub.script(StubReply.error(529, message="Overloaded"))

    with pytest.raises(anthropic.InternalServerError) as caught:
        _text(client)

    assert isinstance(caught.value, anthropic.APIStatusError)
    assert caught.value.status_code == 529
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


@pytest.mark.parametrize(
    ("status", "exc_type", "error_type"),
    [
        (500, anthropic.InternalServerError, "api_error"),
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
    ],
)
def test_other_errors(
    stub: AnthropicStub,
    client: anthropic.Anthropic,
    status: int,
    exc_type: type[anthropic.APIStatusError],
    error_type: str,
) -> None:
    stub.script(StubReply.error(status))

    with pytest.raises(exc_type) as caught:
        _text(client)

    assert caught.value.status_code == status
    assert caught.value.type == error_type


def test_malformed_tool_input_is_sent_as_given(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    stub.script(StubReply.malformed_tool({"wrong": 1}))

    block = _forced(client).content[0]

    assert block.type == "tool_use"
    assert block.name == "propose_choices"
    assert block.input == {"wrong": 1}


def test_raw_malformed_json_body(stub: AnthropicStub, client: anthropic.Anthropic) -> None:
    stub.script(StubReply.raw(200, "{not json", headers={"content-type": "application/json"}))

    # The SDK lets the decoder's error through, as it would for a broken real response.
    with pytest.raises(ValueError):
        _text(client)


def test_callable_sees_the_request(stub: AnthropicStub, client: anthropic.Anthropic) -> None:
    stub.script(StubReply.callable(lambda body: StubReply.text(body["messages"][0]["content"])))

    assert _text(client, "echo me").content[0].text == "echo me"  # type: ignore[union-attr]


def test_unbuildable_auto_reply_is_a_500_that_says_why(client: anthropic.Anthropic) -> None:
    recursive = {
        "name": "tree",
        "input_schema": {
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#/$defs/Node"}},
                    "required": ["child"],
                }
            },
        },
    }

    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "grow"}],
            tools=[recursive],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "tree"},
        )

    assert "schema too deep" in str(caught.value.api_message)


def test_requests_are_recorded_in_order(stub: AnthropicStub, client: anthropic.Anthropic) -> None:
    stub.script(StubReply.text("a"), StubReply.error(500), StubReply.text("c"))

    _text(client, "one")
    with pytest.raises(anthropic.InternalServerError):
        _text(client, "two")
    _text(client, "three")

    recorded = stub.requests
    assert [r.body["messages"][0]["content"] for r in recorded] == ["one", "two", "three"]
    # This SDK sends the api_key as a bearer token.
    assert all(r.headers["authorization"] == "Bearer test" for r in recorded)
    assert stub.pending == 0


def test_default_applies_when_script_is_empty_and_reset_restores_it(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    stub.default = StubReply.text("fallback")
    assert _text(client).content[0].text == "fallback"  # type: ignore[union-attr]

    stub.script(StubReply.text("queued"))
    stub.reset()

    assert stub.pending == 0
    assert stub.requests == []
    assert _text(client).content[0].text == "Stub reply."  # type: ignore[union-attr]


async def test_slow_reply_hits_sdk_timeout(stub: AnthropicStub) -> None:
    stub.script(StubReply.slow(2.0, StubReply.text("late")))

    async with anthropic.AsyncAnthropic(
        api_key="test", base_url=stub.base_url, max_retries=0, timeout=0.2
    ) as client:
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hurry"}]
            )


async def test_slow_reply_arrives_within_timeout(stub: AnthropicStub) -> None:
    stub.script(StubReply.slow(0.05, StubReply.text("on time")))

    async with anthropic.AsyncAnthropic(
        api_key="test", base_url=stub.base_url, max_retries=0
    ) as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "wait"}]
        )

    assert message.content[0].text == "on time"  # type: ignore[union-attr]


def test_sdk_retries_a_429_then_succeeds(stub: AnthropicStub) -> None:
    stub.script(StubReply.error(429, retry_after=0.01), StubReply.text("after retry"))

    with anthropic.Anthropic(api_key="test", base_url=stub.base_url, max_retries=2) as client:
        message = _text(client)

    assert message.content[0].text == "after retry"  # type: ignore[union-attr]
    retry_counts = [r.headers["x-stainless-retry-count"] for r in stub.requests]
    assert retry_counts == ["0", "1"]


async def test_concurrent_async_calls_each_get_a_reply(stub: AnthropicStub) -> None:
    async with anthropic.AsyncAnthropic(
        api_key="test", base_url=stub.base_url, max_retries=0
    ) as client:
        messages = await asyncio.gather(
            *(
                client.messages.create(
                    model=MODEL,
                    max_tokens=256,
                    messages=[{"role": "user", "content": f"call {i}"}],
                    tools=[CHOICES_TOOL],  # type: ignore[list-item]
                    tool_choice={"type": "tool", "name": "propose_choices"},
                )
                for i in range(50)
            )
        )

    assert all(m.content[0].type == "tool_use" for m in messages)
    assert len(stub.requests) == 50


def test_stream_yields_the_same_message(stub: AnthropicStub, client: anthropic.Anthropic) -> None:
    stub.script(StubReply.tool({"choices": []}), StubReply.text("streamed"))

    with client.messages.stream(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "s"}],
        tools=[CHOICES_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "propose_choices"},
    ) as stream:
        tool_message = stream.get_final_message()
    with client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "s"}]
    ) as stream:
        text = stream.get_final_text()

    assert tool_message.content[0].input == {"choices": []}  # type: ignore[union-attr]
    assert tool_message.stop_reason == "tool_use"
    assert text == "streamed"


def test_count_tokens(client: anthropic.Anthropic) -> None:
    result = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "x" * 400}]
    )

    assert result.input_tokens >= 100


def test_missing_credentials_and_missing_fields_are_rejected(stub: AnthropicStub) -> None:
    stub.script(StubReply.text("kept for a valid call"))

    no_auth = httpx.post(f"{stub.base_url}/v1/messages", json={"model": MODEL})
    no_max_tokens = httpx.post(
        f"{stub.base_url}/v1/messages",
        headers={"x-api-key": "k"},
        json={"model": MODEL, "messages": []},
    )

    assert no_auth.status_code == 401
    assert no_auth.json()["error"]["type"] == "authentication_error"
    assert no_max_tokens.status_code == 400
    assert no_max_tokens.json()["error"]["type"] == "invalid_request_error"
    assert stub.pending == 1


def test_start_and_stop_are_idempotent_and_restart_keeps_the_port() -> None:
    server = AnthropicStub()
    server.stop()
    server.start()
    server.start()
    port = server.port
    server.stop()
    server.stop()
    with server:
        assert server.port == port
        response = httpx.post(
            f"{server.base_url}/v1/messages/count_tokens",
            headers={"authorization": "Bearer t"},
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert response.json()["input_tokens"] >= 1


def test_realistic_instance_is_full_plausible_and_valid() -> None:
    instance = realistic_instance(CHOICES_TOOL["input_schema"])
    jsonschema.validate(instance, CHOICES_TOOL["input_schema"])
    choices = instance["choices"]
    assert len(choices) == 3 and [c["correct"] for c in choices] == [True, False, False]
    assert len({c["text"] for c in choices}) == 3  # list elements never repeat one another
    assert set(instance) == set(CHOICES_TOOL["input_schema"]["properties"])  # optional ones too
    nested = {
        "type": "object",
        "properties": {
            "columns": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "cards": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            "tolerance": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
    }
    built = realistic_instance(nested)
    cards = [card for column in built["columns"] for card in column["cards"]]
    assert len(cards) == 9 == len(set(cards)) and built["tolerance"] == 0
    assert [c["label"] for c in built["columns"]] == ["Group A", "Group B", "Group C"]
    untyped = {"type": "object", "properties": {"findings": {"type": "array"}}}
    assert realistic_instance(untyped) == {"findings": [{}, {}, {}]}


def test_cli_serves_realistic_replies() -> None:
    with AnthropicStub() as probe:
        port = probe.port  # a port that was free a moment ago
    proc = subprocess.Popen(
        [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        assert "listening" in proc.stderr.readline()
        with anthropic.Anthropic(
            api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0
        ) as client:
            for _ in range(50):  # the line is printed just before uvicorn starts accepting
                try:
                    block = _forced(client).content[0]
                    break
                except anthropic.APIConnectionError:
                    time.sleep(0.05)
        assert block.type == "tool_use"
        jsonschema.validate(block.input, CHOICES_TOOL["input_schema"])
        assert block.input == realistic_instance(CHOICES_TOOL["input_schema"])
    finally:
        proc.terminate()
        proc.wait(10)


def _wand_request(client: anthropic.Anthropic, config: dict[str, Any]) -> Any:
    """A wand call as editor-assist sends it: the draft between <draft> tags, a forced tool."""
    schema = {
        "type": "object",
        "properties": {
            "proposal": {
                "type": "object",
                "properties": {
                    "choices": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "text": {"type": "string"},
                                "correct": {"type": "boolean"},
                            },
                            "required": ["text", "correct"],
                        },
                    }
                },
                "required": ["choices"],
            },
            "explanation": {"type": "string"},
        },
        "required": ["proposal", "explanation"],
    }
    draft = json.dumps({"type": "mcq", "config": config, "explanation": ""})
    return client.messages.create(
        model=MODEL,
        max_tokens=256,
        system="Question type: mcq",
        messages=[{"role": "user", "content": f"<draft>\n{draft}\n</draft>\n\nPropose."}],
        tools=[{"name": "propose_mcq", "input_schema": schema}],
        tool_choice={"type": "tool", "name": "propose_mcq"},
    ).content[0]


def test_demo_replies_are_computed_from_the_request_and_labelled(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    from quiz_testkit.demo_replies import DEMO_LABEL

    stub.script(StubReply.demo(), StubReply.demo(), StubReply.demo())
    four = _wand_request(client, {"prompt": "2 + 2 ?", "choices": []}).input
    seven = _wand_request(client, {"prompt": "3 + 4 = ?", "choices": []}).input
    assert [c["text"] for c in four["proposal"]["choices"] if c["correct"]] == ["4"]
    assert [c["text"] for c in seven["proposal"]["choices"] if c["correct"]] == ["7"]
    assert four["explanation"].startswith(DEMO_LABEL)
    # A tool no rule knows: the realistic instance of its schema, nothing invented.
    other = _forced(client).content[0]
    assert other.input == realistic_instance(CHOICES_TOOL["input_schema"])


def test_realistic_replies_label_their_prose_as_a_stubs(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    """Issue 34: the CLI without --demo answered "42" for "2 + 2 ?" with an unlabelled "The
    right answer follows from the statement's own data."; its prose now says it is a stub's."""
    from quiz_testkit.anthropic_stub import STUB_LABEL

    stub.script(StubReply.realistic())
    block = _wand_request(client, {"prompt": "2 + 2 ?", "choices": []})
    assert block.input["explanation"].startswith(STUB_LABEL), block.input
    assert "no model" in STUB_LABEL and "ignored" in STUB_LABEL
    # The rest is the realistic instance, untouched (still schema-valid, the merges real).
    assert [c["text"] for c in block.input["proposal"]["choices"]] == ["42", "24", "4.2"]


def test_the_stub_default_is_unchanged_by_the_demo_mode(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    block = _wand_request(client, {"prompt": "2 + 2 ?", "choices": []})
    assert block.input == {"proposal": {"choices": []}, "explanation": ""}  # minimal, as before


def test_cli_demo_says_so_and_labels_its_replies() -> None:
    from quiz_testkit.demo_replies import DEMO_LABEL

    with AnthropicStub() as probe:
        port = probe.port
    proc = subprocess.Popen(
        [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--demo", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "DEMO mode" in first and DEMO_LABEL in first
        with anthropic.Anthropic(
            api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0
        ) as client:
            for _ in range(50):
                try:
                    block = _wand_request(client, {"prompt": "2 + 2 ?", "choices": []})
                    break
                except anthropic.APIConnectionError:
                    time.sleep(0.05)
        assert block.input["explanation"].startswith(DEMO_LABEL)
        assert "demo reply" in proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(10)


class _Clock:
    """A settable monotonic clock for the stub's prompt cache."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cached_call(
    client: anthropic.Anthropic, system: Any, question: str, model: str = "claude-sonnet-4-6"
) -> anthropic.types.Usage:
    return client.messages.create(
        model=model,
        max_tokens=64,
        system=system,
        messages=[{"role": "user", "content": question}],
    ).usage


def test_prompt_cache_writes_then_reads_a_marked_prefix_as_anthropic_reports() -> None:
    clock = _Clock()
    server = AnthropicStub(host="127.0.0.1", port=0, clock=clock)
    server.start()
    rules = "Review the question. " * 300  # 6,300 characters: ~1,575 tokens, over 1,024
    marked = [{"type": "text", "text": rules, "cache_control": {"type": "ephemeral"}}]
    try:
        with anthropic.Anthropic(api_key="t", base_url=server.base_url, max_retries=0) as c:
            first = _cached_call(c, marked, "Question one?")
            assert first.cache_creation_input_tokens == len(json.dumps(rules)) // 4 > 1024
            assert first.cache_read_input_tokens == 0
            assert first.input_tokens > 0  # the question, after the breakpoint
            # Marking a prefix does not change how many tokens the prompt has.
            unmarked = _cached_call(c, rules, "Question one?")
            assert unmarked.input_tokens == (first.input_tokens + first.cache_creation_input_tokens)
            clock.now += 299
            second = _cached_call(c, marked, "Another, longer question?")
            assert second.cache_read_input_tokens == first.cache_creation_input_tokens
            assert second.cache_creation_input_tokens == 0
            assert second.input_tokens > first.input_tokens
            # A read renews the entry: 299 s after the read it is still there; 300 s later not.
            clock.now += 299
            assert _cached_call(c, marked, "Q?").cache_read_input_tokens > 0
            clock.now += 300
            assert _cached_call(c, marked, "Q?").cache_creation_input_tokens > 0
            # Another model has its own cache; Haiku's minimum (4,096) is not reached.
            haiku = _cached_call(c, marked, "Q?", model="claude-haiku-4-5")
            assert (haiku.cache_creation_input_tokens, haiku.cache_read_input_tokens) == (0, 0)
            # The same text unmarked, or another prefix, reads nothing.
            plain = _cached_call(c, rules, "Q?")
            assert (plain.cache_creation_input_tokens, plain.cache_read_input_tokens) == (0, 0)
            changed = [{**marked[0], "text": rules + "!"}]
            assert _cached_call(c, changed, "Q?").cache_creation_input_tokens > 0
            # Under the minimum: marked, but not cached.
            short = [{**marked[0], "text": "Short rules."}]
            assert _cached_call(c, short, "Q?").cache_creation_input_tokens == 0
    finally:
        server.stop()


def test_prompt_cache_breakpoint_on_the_last_tool(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    big = {**CHOICES_TOOL, "description": "Propose answer choices. " * 250}
    tools = [OTHER_TOOL, {**big, "cache_control": {"type": "ephemeral"}}]

    def usage(n: int) -> anthropic.types.Usage:
        return client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=256,
            messages=[{"role": "user", "content": f"Make choices for {n}."}],
            tools=tools,  # type: ignore[arg-type]
            tool_choice={"type": "tool", "name": "propose_choices"},
        ).usage

    first, second = usage(1), usage(2)
    counted = [OTHER_TOOL, big]  # the marks themselves count nothing
    assert first.cache_creation_input_tokens == len(json.dumps(counted, separators=(",", ":"))) // 4
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    # reset() forgets the cache too.
    stub.reset()
    assert usage(3).cache_creation_input_tokens == first.cache_creation_input_tokens


@pytest.mark.parametrize(
    "model", ["claude-sonnet-5-5", "claude-opus-5-5", "claude-sonnet-5-5-20261001"]
)
@pytest.mark.parametrize("choice", [{"type": "tool", "name": "propose_choices"}, {"type": "any"}])
def test_a_forced_tool_to_a_model_that_refuses_it_is_a_400(
    stub: AnthropicStub, client: anthropic.Anthropic, model: str, choice: dict[str, Any]
) -> None:
    """As the real API ("What's new in Claude Sonnet 5.5": forced tool use returns an error);
    the refused request does not eat the scripted reply meant for the next one."""
    stub.script(StubReply.tool({"x": "kept"}))
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model=model,
            max_tokens=64,
            messages=[{"role": "user", "content": "Make choices."}],
            tools=[OTHER_TOOL, CHOICES_TOOL],  # type: ignore[list-item]
            tool_choice=choice,  # type: ignore[arg-type]
        )
    assert info.value.status_code == 400
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "not supported for this model" in info.value.message
    assert stub.pending == 1


def test_a_forced_tool_to_an_older_model_is_answered(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    for model in ("claude-sonnet-4-6", "claude-haiku-4-5"):
        stub.script(StubReply.tool({"x": "y"}))
        message = client.messages.create(
            model=model,
            max_tokens=64,
            messages=[{"role": "user", "content": "x"}],
            tools=[OTHER_TOOL],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "other"},
        )
        assert message.content[0].type == "tool_use"


def test_a_scripted_structured_answer_comes_back_as_json_text_to_output_config(
    stub: AnthropicStub, client: anthropic.Anthropic
) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    stub.script(
        StubReply.tool({"x": "y"}),
        StubReply.malformed_tool({"x": 1}),
        StubReply.tool({"x": "cut"}, stop_reason="max_tokens"),
    )
    replies = [
        client.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "x"}],
            output_config={"format": {"type": "json_schema", "schema": schema}},
        )
        for _ in range(3)
    ]
    texts = [json.loads(r.content[0].text) for r in replies]  # type: ignore[union-attr]
    assert texts == [{"x": "y"}, {"x": 1}, {"x": "cut"}]
    assert [r.stop_reason for r in replies] == ["end_turn", "end_turn", "max_tokens"]
