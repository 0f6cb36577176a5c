"""domain.structured: how each model is asked for structured output; the json_schema path's
reading, hold and cache marking."""

from __future__ import annotations

from decimal import Decimal

import pytest

from quiz_contracts.llm import CompleteRequest
from quiz_llm_gateway.call.attempts import attempt_worst_case, request_shape
from quiz_llm_gateway.domain.output import Unreadable, check_schema, read_json_output
from quiz_llm_gateway.domain.pricing import ModelPrice, estimate_input_tokens
from quiz_llm_gateway.domain.prompt_cache import cache_min_tokens
from quiz_llm_gateway.domain.structured import sent_tools, structured_path

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0}},
    "required": ["score"],
}


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("claude-sonnet-5-5", "json_schema"),
        ("claude-opus-5-5", "json_schema"),
        ("claude-fable-5-1", "json_schema"),
        ("claude-sonnet-5-5-20261001", "json_schema"),  # a dated variant takes its row
        ("claude-opus-5-5-preview", "json_schema"),
        ("claude-haiku-4-5", "tool"),
        ("claude-haiku-4-5-20251001", "tool"),
        ("claude-sonnet-4-6", "tool"),
        ("claude-sonnet-4-5-20250929", "tool"),
        ("claude-opus-4-6", "tool"),
        # Unknown Claude ids take the safe path: no forced tool (a 400 is final).
        ("claude-sonnet-6", "json_schema"),
        ("claude-sonnet-5", "json_schema"),
        ("claude-sonnet-5-520261001", "json_schema"),  # a 5.5 date without its dash
        ("claude-sonnet-4-60", "json_schema"),  # not a variant of claude-sonnet-4-6
        # Another provider's model keeps the tool shape its provider maps.
        ("openai-compat/qwen3", "tool"),
    ],
)
def test_structured_path_per_model(model: str, path: str) -> None:
    assert structured_path(model) == path


def test_sent_tools_drops_the_forced_tool_on_the_json_schema_path() -> None:
    tools = [{"name": "grade", "input_schema": SCHEMA}]
    assert sent_tools("claude-sonnet-5-5", tools) is None
    assert sent_tools("claude-sonnet-4-6", tools) == tools
    assert sent_tools("claude-sonnet-5-5", None) is None


def test_read_json_output_validates_the_text_block() -> None:
    validator = check_schema(SCHEMA)
    assert read_json_output([{"type": "text", "text": ' {"score": 3}\n'}], validator) == {
        "score": 3
    }
    cases = {
        "": "empty",
        "score: 3": "not valid JSON",
        "[3]": "not a JSON object",
        '{"score": -1}': "did not match the schema",
    }
    for text, problem in cases.items():
        out = read_json_output([{"type": "text", "text": text}], validator)
        assert isinstance(out, Unreadable) and problem in out.problem, text
        # No tool_use id: the retry's feedback is a text turn (domain.output.retry_messages).
        assert out.tool_use_id is None
    assert isinstance(read_json_output([], validator), Unreadable)


def test_cache_minimum_of_sonnet_5_5_is_512() -> None:
    assert cache_min_tokens("claude-sonnet-5-5") == 512
    assert cache_min_tokens("claude-sonnet-5-5-20261001") == 512
    assert cache_min_tokens("claude-haiku-4-5") == 4096
    # Opus 5.5's figure is not in the table: the largest known minimum (never a dead mark).
    assert cache_min_tokens("claude-opus-5-5") == 4096


def _request(system: str | None) -> CompleteRequest:
    return CompleteRequest.model_validate(
        {
            "purpose": "review",
            "user": "teacher-1",
            "messages": [{"role": "user", "content": "Grade this."}],
            "output_schema": {"name": "grade", "json_schema": SCHEMA},
            "max_output_tokens": 100,
            "system": system,
        }
    )


def test_the_hold_counts_the_schema_on_both_paths() -> None:
    price = ModelPrice(Decimal("2"), Decimal("10"))
    req = _request(None)
    messages, tools = request_shape(req)
    bare = price.cost_micros(estimate_input_tokens(None, messages, None), 100)
    for model in ("claude-sonnet-5-5", "claude-sonnet-4-6"):
        worst = attempt_worst_case(price, req, messages, tools, model=model)
        assert worst == price.cost_micros(estimate_input_tokens(None, messages, tools), 100)
        assert worst > bare


def test_the_write_premium_on_the_json_schema_path_is_the_system_prompts() -> None:
    """Sonnet 5.5's prefix is the system prompt alone (no tools sent): 2,400 bytes (600
    estimated tokens ≥ 512) are marked and their premium held; a short one is not marked."""
    price = ModelPrice(Decimal("2"), Decimal("10"))
    long_req, short_req = _request("x" * 2400), _request("x" * 400)
    for req, premium in ((long_req, True), (short_req, False)):
        messages, tools = request_shape(req)
        plain = price.cost_micros(estimate_input_tokens(req.system, messages, tools), 100)
        worst = attempt_worst_case(price, req, messages, tools, model="claude-sonnet-5-5")
        assert (worst > plain) is premium
