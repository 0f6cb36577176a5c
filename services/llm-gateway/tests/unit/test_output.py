"""Structured output: the forced tool, validation, and the message of the second attempt."""

from __future__ import annotations

import json

import pytest

from quiz_llm_gateway.domain.output import (
    InvalidSchema,
    Unreadable,
    check_schema,
    forced_tool,
    read_text_output,
    read_tool_output,
    retry_messages,
)

SCHEMA = {
    "type": "object",
    "properties": {"findings": {"type": "array", "items": {"type": "string"}}},
    "required": ["findings"],
    "additionalProperties": False,
}


def _use(data: object, name: str = "review") -> dict[str, object]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": data}


def test_valid_tool_input_is_the_output() -> None:
    validator = check_schema(SCHEMA)
    assert read_tool_output([_use({"findings": []})], "review", validator) == {"findings": []}


def test_schema_errors_say_where_and_what() -> None:
    result = read_tool_output([_use({"findings": [3]})], "review", check_schema(SCHEMA))
    assert isinstance(result, Unreadable)
    assert "findings/0" in result.problem and "not of type 'string'" in result.problem
    assert result.tool_use_id == "toolu_1"


def test_missing_tool_call_and_wrong_tool_are_unreadable() -> None:
    validator = check_schema(SCHEMA)
    assert isinstance(
        read_tool_output([{"type": "text", "text": "hi"}], "review", validator), Unreadable
    )
    assert isinstance(read_tool_output([_use({}, "other")], "review", validator), Unreadable)


def test_bad_schemas_are_refused() -> None:
    with pytest.raises(InvalidSchema):
        check_schema({"type": "array"})
    with pytest.raises(InvalidSchema):
        check_schema({"type": "object", "properties": {"a": {"type": "nope"}}})


def test_forced_tool_carries_the_schema() -> None:
    tool = forced_tool("review", SCHEMA, None)
    assert tool["input_schema"] is SCHEMA and tool["name"] == "review"


def test_retry_appends_the_reply_and_an_error_tool_result() -> None:
    content = [_use({"findings": [3]})]
    problem = read_tool_output(content, "review", check_schema(SCHEMA))
    assert isinstance(problem, Unreadable)
    messages = retry_messages([{"role": "user", "content": "q"}], content, problem)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert result["tool_use_id"] == "toolu_1" and "findings/0" in result["content"]


def test_empty_text_is_unreadable_and_asks_again_in_text() -> None:
    assert read_text_output([{"type": "text", "text": "  "}]) == Unreadable(
        "Your reply was empty. Answer in text."
    )
    problem = read_text_output([])
    assert isinstance(problem, Unreadable)
    messages = retry_messages([{"role": "user", "content": "q"}], [], problem)
    assert messages[-1]["content"][0]["type"] == "text"
    assert read_text_output([{"type": "text", "text": "ok"}]) == "ok"
    # A reply's text blocks go back with their type and text only, never empty.
    blocks = [{"type": "text", "text": "", "citations": None}, {"type": "text", "text": "a"}]
    echoed = retry_messages([{"role": "user", "content": "q"}], blocks, problem)[1]["content"]
    assert echoed == [{"type": "text", "text": "(empty)"}, {"type": "text", "text": "a"}]


def test_the_validator_is_kept_per_schema_and_a_refused_one_is_not() -> None:
    from quiz_llm_gateway.domain import output

    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    first = output.cached_validator(schema)
    assert output.cached_validator(json.loads(json.dumps(schema))) is first  # an equal copy
    other = output.cached_validator({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert other is not first
    assert not first.is_valid({"a": 1}) and other.is_valid({"a": 1})
    schema["properties"]["a"]["type"] = "integer"  # the caller's dict changes afterwards
    assert not first.is_valid({"a": 1}), "the kept validator has its own copy"
    bad = {"type": "object", "properties": {"a": {"pattern": "(a)\\1"}}}
    for _ in range(2):
        with pytest.raises(InvalidSchema):
            output.cached_validator(bad)
    assert repr(bad) not in output._validators
    for n in range(output.VALIDATORS_KEPT + 5):
        output.cached_validator({"type": "object", "maxProperties": n})
    assert len(output._validators) == output.VALIDATORS_KEPT
