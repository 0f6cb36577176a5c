"""The Anthropic Messages API behind one narrow call; its errors sorted for retry and circuit."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import anthropic
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

# Statuses worth another try: rate limited, overloaded, server errors, request timeout.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
# Statuses that say the provider is unwell: they open the circuit. A 429 says it is up.
OUTAGE_STATUSES = frozenset({500, 502, 503, 504, 529})

_tracer = trace.get_tracer("quiz.llm_gateway.provider")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """What the gateway needs of a Messages API answer."""

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


def _retry_after(response: Any) -> float | None:
    try:
        return parse_retry_after(response.headers.get("retry-after"))
    except AttributeError:
        return None


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


def read_message(message: Any) -> ProviderReply:
    """The parts of an SDK answer the gateway uses; ProviderError when it is not a Message.

    The SDK hands back whatever a 200 carried: a `str` for HTML, a Message built without
    validation for `{}` or an error body (no usage, no content). Each is a provider failure.
    """
    usage = getattr(message, "usage", None)
    content = getattr(message, "content", None)
    if (
        not isinstance(message, anthropic.types.Message)
        or message.type != "message"
        or not isinstance(content, list)
        or usage is None
        or not isinstance(getattr(usage, "input_tokens", None), int)
        or not isinstance(getattr(usage, "output_tokens", None), int)
    ):
        kind = (
            type(message).__name__
            if not isinstance(message, anthropic.types.Message)
            else (f"type={getattr(message, 'type', None)!r}, usage={'yes' if usage else 'missing'}")
        )
        raise ProviderError(
            f"bad_response: not a Messages API reply ({kind})", retryable=True, outage=True
        )
    input_tokens = (
        usage.input_tokens
        + (getattr(usage, "cache_creation_input_tokens", None) or 0)
        + (getattr(usage, "cache_read_input_tokens", None) or 0)
    )
    problem = None
    try:
        blocks = sanitize(
            [
                block.model_dump(mode="json") if hasattr(block, "model_dump") else block
                for block in content
            ]
        )
        if not all(isinstance(b, dict) for b in blocks):
            raise TypeError("a content block is not an object")
    except Exception as e:  # e.g. nesting past the serialiser's depth: paid, but unreadable
        blocks, problem = [], f"{type(e).__name__}: {e}"[:200]
    return ProviderReply(
        problem=problem,
        content=blocks,
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens,
        stop_reason=message.stop_reason if isinstance(message.stop_reason, str) else None,
        model=message.model if isinstance(message.model, str) else "",
    )


# How long a failed capabilities lookup is remembered before it is asked again.
CAPABILITIES_RETRY_S = 300.0
CAPABILITIES_TIMEOUT_S = 5.0


class AnthropicProvider:
    """One SDK client; the SDK's own retries are off so deadline, backoff and circuit are ours."""

    def __init__(self, api_key: str, base_url: str | None, timeout_s: float) -> None:
        # The SDK on its aiohttp transport (the `anthropic[aiohttp]` extra): ~30 % less CPU per
        # call than httpx, whose pool checks every pooled connection on each request (issue 10).
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout_s,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout_s),
            # The gateway makes its own GenAI span per request (below), with the purpose;
            # the SDK's second span per call, and a traceparent for the provider, are pure cost.
            open_telemetry={"traces": False, "propagation": False},
        )
        self._effort: dict[str, tuple[float, frozenset[str]]] = {}
        self._effort_lock = asyncio.Lock()

    async def effort_levels(self, model: str) -> frozenset[str]:
        """The `output_config.effort` levels `model` supports, from the Models API's
        capabilities (asked once per model; a failed lookup means none, for a while)."""
        known = self._effort.get(model)
        if known is not None and known[0] > time.monotonic():
            return known[1]
        async with self._effort_lock:
            known = self._effort.get(model)
            if known is not None and known[0] > time.monotonic():
                return known[1]
            levels, ttl = frozenset[str](), CAPABILITIES_RETRY_S
            try:
                info = await self.client.models.retrieve(model, timeout=CAPABILITIES_TIMEOUT_S)
                effort = getattr(getattr(info, "capabilities", None), "effort", None)
                if effort is not None and getattr(effort, "supported", False) is True:
                    levels = frozenset(
                        level
                        for level in ("low", "medium", "high", "xhigh", "max")
                        if getattr(getattr(effort, level, None), "supported", False) is True
                    )
                ttl = float("inf")
            except Exception as e:
                log.warning("capabilities of %s unknown (%s): effort not sent", model, e)
            self._effort[model] = (time.monotonic() + ttl, levels)
            return levels

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self.client.close()

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
    ) -> ProviderReply:
        """One Messages API request; raises ProviderError on any failure.

        `effort` goes out as `output_config.effort` when the model reports that level.
        """
        kwargs: dict[str, Any] = {}
        if effort is not None and effort in await self.effort_levels(model):
            kwargs["output_config"] = {"effort": effort}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = {"type": "tool", "name": tools[0]["name"]}
        # OTel GenAI semantic conventions: one CLIENT span per provider request.
        with _tracer.start_as_current_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.system": "anthropic",
                "gen_ai.request.model": model,
                "gen_ai.request.max_tokens": max_tokens,
                "quiz.llm.purpose": purpose,
            },
        ) as span:
            try:
                message = await self.client.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    messages=messages,  # type: ignore[arg-type]
                    timeout=timeout_s,
                    **kwargs,
                )
            except anthropic.APIStatusError as e:
                status = e.status_code
                span.set_status(Status(StatusCode.ERROR, str(status)))
                span.set_attribute("error.type", str(status))
                raise ProviderError(
                    f"{status}: {e.api_message or e.message}"[:300],
                    status=status,
                    retryable=status in RETRYABLE_STATUSES,
                    outage=status in OUTAGE_STATUSES,
                    retry_after_s=_retry_after(e.response),
                ) from e
            except anthropic.APITimeoutError as e:
                span.set_status(Status(StatusCode.ERROR, "timeout"))
                span.set_attribute("error.type", "timeout")
                raise ProviderError(
                    "timeout: provider did not answer", retryable=True, outage=True
                ) from e
            except anthropic.APIConnectionError as e:
                span.set_status(Status(StatusCode.ERROR, "connection"))
                span.set_attribute("error.type", "connection")
                raise ProviderError(f"connection: {e}"[:300], retryable=True, outage=True) from e
            except Exception as e:
                # An answer the SDK could not read (junk JSON, a body it cannot parse): the
                # provider failed this request. Retried, and the circuit is told.
                span.set_status(Status(StatusCode.ERROR, "bad_response"))
                span.set_attribute("error.type", "bad_response")
                raise ProviderError(
                    f"bad_response: {type(e).__name__}: {e}"[:300], retryable=True, outage=True
                ) from e
            try:
                reply = read_message(message)
            except ProviderError:
                span.set_status(Status(StatusCode.ERROR, "bad_response"))
                span.set_attribute("error.type", "bad_response")
                raise
            if span.is_recording():
                span.set_attribute("gen_ai.response.model", reply.model)
                span.set_attribute("gen_ai.response.id", str(message.id))
                span.set_attribute("gen_ai.usage.input_tokens", message.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", reply.output_tokens)
                if reply.stop_reason:
                    span.set_attribute("gen_ai.response.finish_reasons", [reply.stop_reason])
            return reply
