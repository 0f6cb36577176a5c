"""Prompt caching (issue 31 point 2): the mark, the minimum, the prices, the hold."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quiz_llm_gateway.domain.output import forced_tool
from quiz_llm_gateway.domain.pricing import DEFAULT_PRICES, ModelPrice, estimate_input_tokens
from quiz_llm_gateway.domain.prompt_cache import (
    EPHEMERAL,
    cache_min_tokens,
    cacheable,
    cached_cost_micros,
    marked,
    prefix_tokens_estimate,
    write_premium_micros,
)

SONNET = DEFAULT_PRICES["claude-sonnet-4-6"]
TOOL = forced_tool("report", {"type": "object", "properties": {"a": {"type": "string"}}}, None)


def test_minimums_per_model_dated_variants_and_other_providers() -> None:
    assert cache_min_tokens("claude-sonnet-4-6") == 1024
    assert cache_min_tokens("claude-sonnet-5") == 1024
    assert cache_min_tokens("claude-haiku-4-5") == 4096
    assert cache_min_tokens("claude-haiku-4-5-20251001") == 4096
    assert cache_min_tokens("claude-sonnet-4-5-20250929") == 1024
    # A Claude id without a known figure waits for the largest minimum; not Claude: never.
    assert cache_min_tokens("claude-opus-9") == 4096
    assert cache_min_tokens("openai-compat/llama3") is None


def test_the_estimate_is_bytes_over_four_rounded_down() -> None:
    assert prefix_tokens_estimate("x" * 4099, None) == 1024
    tools_bytes = len(json.dumps([TOOL], separators=(",", ":")).encode())
    assert prefix_tokens_estimate("é" * 100, [TOOL]) == (200 + tools_bytes) // 4
    assert prefix_tokens_estimate(None, None) == 0


def test_marked_only_at_the_model_minimum() -> None:
    at, under = "x" * (4 * 1024), "x" * (4 * 1024 - 1)
    assert cacheable("claude-sonnet-4-6", at, None)
    assert not cacheable("claude-sonnet-4-6", under, None)
    # Haiku's minimum is four times Sonnet's: the same prompt is not marked there.
    assert not cacheable("claude-haiku-4-5", at, None)
    assert cacheable("claude-haiku-4-5", "x" * (4 * 4096), None)
    assert not cacheable("openai-compat/llama3", "x" * 100_000, None)
    assert not cacheable("claude-sonnet-4-6", None, None)


def test_the_mark_ends_the_stable_prefix_and_copies() -> None:
    system, tools = marked("rules", [TOOL])
    assert system == [{"type": "text", "text": "rules", "cache_control": EPHEMERAL}]
    assert tools == [TOOL] and "cache_control" not in TOOL
    other = {**TOOL, "name": "second"}
    system, tools = marked(None, [TOOL, other])
    assert system is None
    assert tools is not None and tools[0] is TOOL
    assert tools[1] == {**other, "cache_control": EPHEMERAL}
    assert "cache_control" not in other


def test_cache_reads_cost_a_tenth_and_writes_a_quarter_more() -> None:
    # 10,000 input tokens at $3/MTok: 30,000 µ$ uncached.
    assert cached_cost_micros(SONNET, 10_000, 0) == SONNET.cost_micros(10_000, 0) == 30_000
    # 8,000 read from the cache, 2,000 plain: 8,000 × 0.3 + 2,000 × 3 µ$.
    assert cached_cost_micros(SONNET, 10_000, 0, cache_read_tokens=8_000) == 2_400 + 6_000
    # 8,000 written to it: 8,000 × 3.75 + 2,000 × 3.
    assert cached_cost_micros(SONNET, 10_000, 0, cache_write_tokens=8_000) == 30_000 + 6_000
    assert cached_cost_micros(SONNET, 0, 1_000) == 15_000
    # Rounded up once: one read token at $1/MTok is a tenth of a micro-dollar.
    assert cached_cost_micros(ModelPrice(Decimal(1), Decimal(5)), 1, 0, cache_read_tokens=1) == 1


def test_usage_whose_cache_counts_exceed_the_input_is_refused() -> None:
    with pytest.raises(ValueError, match="exceed"):
        cached_cost_micros(SONNET, 10, 0, cache_read_tokens=8, cache_write_tokens=8)


def test_the_write_premium_is_a_quarter_of_the_prefix_bound() -> None:
    system = "r" * 10_000
    bound = estimate_input_tokens(system, [], [TOOL])
    assert write_premium_micros(SONNET, system, [TOOL]) == -(-bound * 3 // 4)


@given(
    system_len=st.integers(0, 20_000),
    user_len=st.integers(1, 20_000),
    read_share=st.floats(0, 1),
    written=st.booleans(),
    output=st.integers(0, 4_000),
)
def test_no_usage_of_a_marked_request_costs_more_than_its_hold(
    system_len: int, user_len: int, read_share: float, written: bool, output: int
) -> None:
    """Whatever the provider reports (every token within the byte bounds, the cached part
    within the prefix), the cost fits the hold: input bound at full price plus the premium."""
    system = "s" * system_len
    messages = [{"role": "user", "content": "u" * user_len}]
    hold = SONNET.cost_micros(estimate_input_tokens(system, messages, [TOOL]), 4_000)
    hold += write_premium_micros(SONNET, system, [TOOL])
    prefix = estimate_input_tokens(system, [], [TOOL])
    total = estimate_input_tokens(system, messages, [TOOL])
    cached = int(prefix * read_share)
    read, write = (0, cached) if written else (cached, 0)
    assert cached_cost_micros(SONNET, total, output, read, write) <= hold
