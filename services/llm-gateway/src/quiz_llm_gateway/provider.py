"""The Anthropic Messages API behind one narrow call; its errors sorted for retry and circuit."""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """What the gateway needs of a Messages API answer."""

    content: list[dict[str, Any]]
    input_tokens: int
    output_tokens: int
    stop_reason: str | None
    model: str


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


def _retry_after(response: Any) -> float | None:
    try:
        value = response.headers.get("retry-after")
        return max(float(value), 0.0) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


class AnthropicProvider:
    """One SDK client; the SDK's own retries are off so deadline, backoff and circuit are ours."""

    def __init__(self, api_key: str, base_url: str | None, timeout_s: float) -> None:
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s
        )

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
    ) -> ProviderReply:
        """One Messages API request; raises ProviderError on any failure."""
        kwargs: dict[str, Any] = {}
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
            except anthropic.APIError as e:
                # An answer the SDK could not read: the provider is up, the reply is unusable.
                span.set_status(Status(StatusCode.ERROR, "bad_response"))
                span.set_attribute("error.type", "bad_response")
                raise ProviderError(f"bad_response: {e}"[:300], retryable=True) from e
            usage = message.usage
            span.set_attribute("gen_ai.response.model", message.model)
            span.set_attribute("gen_ai.response.id", message.id)
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if message.stop_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [message.stop_reason])
            input_tokens = (
                usage.input_tokens
                + (usage.cache_creation_input_tokens or 0)
                + (usage.cache_read_input_tokens or 0)
            )
            return ProviderReply(
                content=[block.model_dump(mode="json") for block in message.content],
                input_tokens=input_tokens,
                output_tokens=usage.output_tokens,
                stop_reason=message.stop_reason,
                model=message.model,
            )
