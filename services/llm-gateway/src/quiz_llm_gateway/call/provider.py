"""What every provider of the gateway shares: the `Provider` protocol and its shapes.

A provider (`call/anthropic.py`; `call/openai_compat.py`, issue 31) turns one request into a
`ProviderReply` or raises a `ProviderError` whose `retryable` and `outage` flags drive
`call/retries.py` (retries, backoff, circuit). The helpers here read what any HTTP provider
sends: a `retry-after` header, text with lone surrogates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

# Statuses worth another try: rate limited, overloaded, server errors, request timeout.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Statuses that say the provider is unwell: they open the circuit. A 429 says it is up.
OUTAGE_STATUSES = frozenset({500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """What the gateway needs of a provider's answer (any provider's, in its own words)."""

    content: list[dict[str, Any]]
    input_tokens: int
    output_tokens: int
    stop_reason: str | None
    model: str
    # Set when the answer was paid (usage read) but its content could not be: never retried
    # as if unread, settled, then llm_failed.
    problem: str | None = None


class ProviderError(Exception):
    """A failed provider request, classified."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        outage: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.outage = outage
        self.retry_after_s = retry_after_s

    @property
    def kind(self) -> str:
        """A low-cardinality label: the status, or timeout / connection."""
        return str(self.status) if self.status is not None else self.args[0].split(":")[0]


# The longest `retry-after` believed: past it the header is junk or an outage, not advice.
RETRY_AFTER_MAX_S = 60.0


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `retry-after` header, clamped to [0, RETRY_AFTER_MAX_S].

    `nan`, `inf`, a date or text are ignored (None: the gateway's own backoff applies); a
    negative value means "now" (0); a huge one is cut to RETRY_AFTER_MAX_S.
    """
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


def sanitize_text(value: str) -> str:
    """`value` with lone surrogates (`"\\ud800"` from a JSON escape) replaced by U+FFFD.

    A lone surrogate cannot be encoded as UTF-8: left in, the reply cannot be serialised.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def sanitize(value: Any) -> Any:
    """A JSON value with every string (keys too) passed through `sanitize_text`."""
    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, dict):
        return {sanitize_text(k): sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v) for v in value]
    return value


class Provider(Protocol):
    """What the gateway needs of a provider client (the real one, or a test double)."""

    async def create(
        self,
        *,
        model: str,
        system: str | None,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        timeout_s: float,
        purpose: str,
        effort: str | None = None,
    ) -> ProviderReply: ...
