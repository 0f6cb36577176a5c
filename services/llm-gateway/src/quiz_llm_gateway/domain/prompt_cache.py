"""Prompt caching (issue 31 point 2): what is marked cacheable, what it costs, what is held. Pure.

Anthropic's Messages API caches the prefix of a request up to a block carrying
`cache_control: {"type": "ephemeral"}` (order: tools, then system, then messages) for 5 minutes
from its last use. Its usage then splits the input in three:
`cache_creation_input_tokens` (written to the cache: 1.25 × the input price),
`cache_read_input_tokens` (read from it: 0.1 ×) and `input_tokens` (the rest: 1 ×).
A prefix shorter than the model's minimum is not cached (no error, full price).

The gateway marks the stable prefix — the system prompt, else the forced tool; on the
json_schema path (`domain.structured`, no tools sent) the system prompt alone — when its
estimate reaches the model's minimum (`cacheable`), and nothing else: the per-question text is
the user message, after the mark, so the prefix is byte-identical from one call to the next.

Tokens from bytes, conservatively (`prefix_tokens_estimate`): UTF-8 bytes of the system text
and of the tools' JSON as sent, divided by 4, rounded down. Claude's tokenizer makes about one
token per 3.5 characters of English prose and more tokens per byte of JSON, so bytes / 4
counts fewer tokens than the provider does: a prefix estimated at the minimum is at least the
minimum. It never counts the provider's own tool-use framing. A prefix that really reaches the
minimum but is estimated under it only goes uncached (full price, as before).
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_CEILING, Decimal
from typing import Any, Final

from quiz_llm_gateway.domain.pricing import (
    MICROS_PER_USD,
    TOKENS_PER_MILLION,
    ModelPrice,
    estimate_input_tokens,
)

EPHEMERAL: Final = {"type": "ephemeral"}
# Multipliers of the input price (Anthropic's pricing page: 5-minute writes, reads).
CACHE_WRITE_MULTIPLIER: Final = Decimal("1.25")
CACHE_READ_MULTIPLIER: Final = Decimal("0.1")
BYTES_PER_TOKEN: Final = 4

# The minimum cacheable prompt length per model (Anthropic's prompt-caching page, as of
# 2026-12): 512 tokens for Sonnet 5.5 ("What's new in Claude Sonnet 5.5": down from Sonnet
# 5's 1,024), 1,024 for the Sonnet 4.5/4.6/5 generation, 4,096 for Haiku 4.5 and Opus
# 4.5/4.6. A model not listed (a Claude id we have no figure for: Opus 5.5's was not found
# in the pages read) takes the largest known minimum: marked later than it could be, never
# a mark that cannot take. Not a Claude id (an OpenAI-compatible model): never marked.
CACHE_MIN_TOKENS: Final[dict[str, int]] = {
    "claude-sonnet-5-5": 512,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-5": 1024,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
}
UNKNOWN_CLAUDE_MIN_TOKENS: Final = 4096
_DATED = re.compile(r"(?P<base>.+)-\d{8}")


def cache_min_tokens(model: str) -> int | None:
    """The minimum cacheable prefix of `model` in tokens; None when it is never marked.

    A dated snapshot (`claude-sonnet-4-5-20250929`) takes its listed model's minimum.
    """
    if model in CACHE_MIN_TOKENS:
        return CACHE_MIN_TOKENS[model]
    dated = _DATED.fullmatch(model)
    if dated is not None and dated["base"] in CACHE_MIN_TOKENS:
        return CACHE_MIN_TOKENS[dated["base"]]
    return UNKNOWN_CLAUDE_MIN_TOKENS if model.startswith("claude-") else None


def prefix_tokens_estimate(system: str | None, tools: list[dict[str, Any]] | None) -> int:
    """Tokens of the stable prefix (tools and system), estimated low: UTF-8 bytes // 4."""
    size = len((system or "").encode())
    if tools:
        size += len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())
    return size // BYTES_PER_TOKEN


def cacheable(model: str, system: str | None, tools: list[dict[str, Any]] | None) -> bool:
    """Whether the request's stable prefix is marked: its estimate reaches `model`'s minimum."""
    minimum = cache_min_tokens(model)
    if minimum is None or not (system or tools):
        return False
    return prefix_tokens_estimate(system, tools) >= minimum


def marked(
    system: str | None, tools: list[dict[str, Any]] | None
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """`system` and `tools` as sent with the cache breakpoint at the end of the prefix.

    With a system prompt: one text block carrying `cache_control` (tools come before the
    system, so the mark covers both). Without: the last tool carries it. The caller's lists
    are not changed.
    """
    if system:
        return [{"type": "text", "text": system, "cache_control": EPHEMERAL}], tools
    if tools:
        return system, [*tools[:-1], {**tools[-1], "cache_control": EPHEMERAL}]
    return system, tools


def cached_cost_micros(
    price: ModelPrice,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> int:
    """Cost in micro-USD of an answer whose `input_tokens` (every input token) include
    `cache_read_tokens` at 0.1 × and `cache_write_tokens` at 1.25 × the input price; rounded
    up once. ValueError when the cache counts exceed the input (a usage that cannot be)."""
    plain = input_tokens - cache_read_tokens - cache_write_tokens
    if min(plain, cache_read_tokens, cache_write_tokens, output_tokens) < 0:
        raise ValueError("cache token counts exceed the input tokens")
    unit = price.input_usd_per_mtok
    usd = (
        Decimal(plain) * unit
        + Decimal(cache_read_tokens) * unit * CACHE_READ_MULTIPLIER
        + Decimal(cache_write_tokens) * unit * CACHE_WRITE_MULTIPLIER
        + Decimal(output_tokens) * price.output_usd_per_mtok
    ) / TOKENS_PER_MILLION
    return int((usd * MICROS_PER_USD).to_integral_value(rounding=ROUND_CEILING))


def write_premium_micros(
    price: ModelPrice, system: str | None, tools: list[dict[str, Any]] | None
) -> int:
    """What a marked prefix may add to a hold: 0.25 × the input price on the prefix's upper
    bound (bytes of system and tools plus the request's framing, `estimate_input_tokens`).

    The hold stays the worst case: every input token bound at the full price (a read is never
    counted as a discount in advance) plus this premium, since what is written to the cache is
    at most the prefix. So `cached_cost_micros(...) ≤ worst case + premium` for any usage the
    provider can report for the request.
    """
    bound = estimate_input_tokens(system, [], tools)
    usd = (
        Decimal(bound) * price.input_usd_per_mtok * (CACHE_WRITE_MULTIPLIER - 1)
    ) / TOKENS_PER_MILLION
    return int((usd * MICROS_PER_USD).to_integral_value(rounding=ROUND_CEILING))
