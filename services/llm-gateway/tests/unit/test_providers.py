"""Which provider runs a model, residency, self-hosted prices, chat translation (issue 31)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from quiz_llm_gateway.domain.openai_chat import chat_messages, chat_request, reply_blocks
from quiz_llm_gateway.domain.output import (
    Unreadable,
    cached_validator,
    forced_tool,
    read_tool_output,
    retry_messages,
)
from quiz_llm_gateway.domain.pricing import ModelPrice, PricingError
from quiz_llm_gateway.domain.providers import (
    check_local_models_priced,
    display_name,
    is_local,
    parse_price_pairs,
    provider_kind,
    refused_purposes,
    residency_message,
    residency_refused,
    unusable,
    wire_model,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOL = forced_tool("count", SCHEMA, None)


@pytest.mark.parametrize(
    ("model", "kind", "local", "wire"),
    [
        ("claude-haiku-4-5", "anthropic", False, "claude-haiku-4-5"),
        ("openai-compat/gemma3:270m", "openai-compat", True, "gemma3:270m"),
        ("openai-compat/org/model-7b", "openai-compat", True, "org/model-7b"),
        ("openai-compat/", "openai-compat", False, ""),  # no model named: nothing local to call
        ("gpt-4o", "anthropic", False, "gpt-4o"),  # only the prefix routes away from Anthropic
        ("OPENAI-COMPAT/x", "anthropic", False, "OPENAI-COMPAT/x"),
    ],
)
def test_the_prefix_alone_decides_the_provider_and_locality(
    model: str, kind: str, local: bool, wire: str
) -> None:
    assert provider_kind(model) == kind
    assert is_local(model) is local
    assert wire_model(model) == wire


def test_local_residency_refuses_every_non_local_model_and_any_refuses_none() -> None:
    models = {"review": "claude-sonnet-4-6", "poll": "openai-compat/llama3", "generate": "x"}
    assert refused_purposes(models, "local") == {
        "generate": "x",
        "review": "claude-sonnet-4-6",
    }
    assert refused_purposes(models, "any") == {}
    assert residency_refused("openai-compat/llama3", "local") is False
    message = residency_message("review", "claude-sonnet-4-6")
    assert "LLM_DATA_RESIDENCY=local" in message and "PURPOSE_MODELS['review']" in message


def test_pages_name_anthropic_or_the_self_hosted_server() -> None:
    assert display_name("anthropic", None) == "Anthropic"
    assert display_name("openai-compat", "http://llm.school.ch:8000/v1") == "llm.school.ch"
    assert display_name("openai-compat", "http://x:1/v1", "Ollama") == "Ollama"
    assert display_name("openai-compat", None) == "self-hosted"


def test_price_pairs_accept_an_explicit_zero_and_name_the_setting_otherwise() -> None:
    prices = parse_price_pairs({"openai-compat/a": [0, 0], "openai-compat/b": ["0.1", 0.4]})
    assert prices["openai-compat/a"] == ModelPrice(Decimal(0), Decimal(0))
    assert prices["openai-compat/b"] == ModelPrice(Decimal("0.1"), Decimal("0.4"))
    for bad in ([1], {"input": 1, "output": 2}, [1, None], [True, 1], [-1, 0], ["nan", 0]):
        with pytest.raises(PricingError, match=r"LLM_MODEL_PRICES\['m'\]"):
            parse_price_pairs({"m": bad})


def test_a_self_hosted_model_without_its_own_price_refuses_to_start() -> None:
    models = {"poll": "openai-compat/llama3", "review": "claude-sonnet-4-6"}
    with pytest.raises(PricingError, match="openai-compat/llama3: set LLM_MODEL_PRICES"):
        check_local_models_priced(models, {})
    check_local_models_priced(models, parse_price_pairs({"openai-compat/llama3": [0, 0]}))


def test_a_forced_tool_goes_out_as_a_function_that_tool_choice_names() -> None:
    body = chat_request(
        model="llama3",
        system="Be brief.",
        messages=[{"role": "user", "content": "Count."}],
        tools=[TOOL],
        max_tokens=50,
        mode="tools",
    )
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"][0]["function"]["parameters"] == SCHEMA
    assert body["tool_choice"] == {"type": "function", "function": {"name": "count"}}
    assert "response_format" not in body and body["max_tokens"] == 50


def test_json_schema_mode_asks_response_format_and_reads_the_text_as_the_tool_input() -> None:
    body = chat_request(
        model="m", system=None, messages=[], tools=[TOOL], max_tokens=5, mode="json_schema"
    )
    assert body["response_format"]["json_schema"] == {"name": "count", "schema": SCHEMA}
    assert "tools" not in body and body["messages"] == []
    blocks, stop = reply_blocks({"content": '{"n": 3}'}, "stop", "count", "json_schema")
    assert read_tool_output(blocks, "count", cached_validator(SCHEMA)) == {"n": 3}
    assert stop == "end_turn"


def test_json_object_mode_is_the_older_response_format_read_alike() -> None:
    body = chat_request(
        model="m", system=None, messages=[], tools=[TOOL], max_tokens=5, mode="json_object"
    )
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert "tools" not in body
    blocks, _ = reply_blocks({"content": '{"n": 4}'}, "stop", "count", "json_object")
    assert read_tool_output(blocks, "count", cached_validator(SCHEMA)) == {"n": 4}


def test_length_is_a_cut_reply_and_a_call_reads_as_a_tool_use() -> None:
    message = {
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "count", "arguments": "{}"}}
        ],
    }
    blocks, stop = reply_blocks(message, "length", "count", "tools")
    assert stop == "max_tokens"
    assert blocks == [{"type": "tool_use", "id": "c1", "name": "count", "input": {}}]
    assert reply_blocks(message, "tool_calls", "count", "tools")[1] == "tool_use"
    assert reply_blocks({"content": "hi"}, "stop", None, "tools") == (
        [{"type": "text", "text": "hi"}],
        "end_turn",
    )


@pytest.mark.parametrize("mode", ["tools", "json_schema", "json_object"])
def test_the_second_attempt_tells_the_model_what_was_wrong_in_chat_terms(mode: Any) -> None:
    arguments = '{"n": "three"}' if mode == "tools" else None
    message: dict[str, Any] = (
        {"tool_calls": [{"id": "c1", "function": {"name": "count", "arguments": arguments}}]}
        if mode == "tools"
        else {"content": '{"n": "three"}'}
    )
    blocks, _ = reply_blocks(message, "stop", "count", mode)
    problem = read_tool_output(blocks, "count", cached_validator(SCHEMA))
    assert isinstance(problem, Unreadable) and problem.tool_use_id is not None
    first = [{"role": "user", "content": "Count."}]
    turns = chat_messages(None, retry_messages(first, blocks, problem), mode)
    assert turns[0] == {"role": "user", "content": "Count."}
    if mode == "tools":
        assert turns[1]["tool_calls"][0]["id"] == "c1"
        assert json.loads(turns[1]["tool_calls"][0]["function"]["arguments"]) == {"n": "three"}
        assert turns[2]["role"] == "tool" and turns[2]["tool_call_id"] == "c1"
        assert "did not match the schema" in turns[2]["content"]
    else:
        assert turns[1] == {"role": "assistant", "content": '{"n": "three"}'}
        assert turns[2]["role"] == "user" and "did not match the schema" in turns[2]["content"]


def test_arguments_that_are_not_json_stay_raw_and_read_as_unreadable() -> None:
    message = {"tool_calls": [{"id": "c", "function": {"name": "count", "arguments": "{n:"}}]}
    blocks, _ = reply_blocks(message, "tool_calls", "count", "tools")
    problem = read_tool_output(blocks, "count", cached_validator(SCHEMA))
    assert isinstance(problem, Unreadable) and "not a JSON object" in problem.problem


def test_residency_refuses_before_a_missing_provider_and_each_names_its_setting() -> None:
    assert unusable("poll", "openai-compat/m", "local", True) is None
    assert unusable("poll", "claude-haiku-4-5", "any", True) is None
    refused = unusable("poll", "claude-haiku-4-5", "local", True)
    assert refused is not None and "LLM_DATA_RESIDENCY=local" in refused
    assert "LLM_DATA_RESIDENCY" in (unusable("poll", "claude-haiku-4-5", "local", False) or "")
    assert "OPENAI_COMPAT_BASE_URL" in (unusable("poll", "openai-compat/m", "any", False) or "")
    assert "ANTHROPIC_API_KEY" in (unusable("poll", "claude-haiku-4-5", "any", False) or "")
