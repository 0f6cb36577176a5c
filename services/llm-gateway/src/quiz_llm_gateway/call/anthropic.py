"""The Anthropic Messages API behind one narrow call; its errors sorted for retry and circuit.

Two paths send the same request and read the same answer (issue 24, goal 2):
- the lean path (the default): the request line, headers and auth the SDK would send, taken
  from the SDK client once, then one aiohttp POST and `json.loads` of the body. The SDK's
  per-call machinery (options copies, body walk, httpx request and response wrappers, the
  pydantic `Message` built and dumped back to dicts) was a third of the gateway's CPU per call.
- the SDK path (`LLM_GATEWAY_PROVIDER_PATH=sdk`): `client.messages.create`, as before.
Both map every outcome to the same ProviderReply or ProviderError, message text included;
`tests/integration/test_provider_parity.py` runs the stub's whole reply and error matrix
through both and compares the gateway's replies. The SDK stays for everything else (the
Models API's capabilities, the client's configuration and headers).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Literal

import aiohttp
import anthropic
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from quiz_llm_gateway.call.provider import (
    OUTAGE_STATUSES,
    RETRYABLE_STATUSES,
    ProviderError,
    ProviderReply,
    parse_retry_after,
    sanitize,
)
from quiz_llm_gateway.domain.prompt_cache import cacheable, marked
from quiz_llm_gateway.domain.structured import output_format, sent_tools
from quiz_servicekit.telemetry import spans_recorded

_tracer = trace.get_tracer("quiz.llm_gateway.provider")
log = logging.getLogger(__name__)


def _retry_after(response: Any) -> float | None:
    try:
        return parse_retry_after(response.headers.get("retry-after"))
    except AttributeError:
        return None


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
    # Anthropic's input_tokens are those after the cache breakpoint; ours are all of them.
    cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
    cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
    input_tokens = usage.input_tokens + cache_write + cache_read
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
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_write,
    )


def read_body(data: Any) -> ProviderReply:
    """`read_message` for a reply decoded by `json.loads`: the same checks, the same errors.

    The SDK builds a `Message` from any JSON object without validating it, so its checks see
    the raw values; a mapping `usage` becomes a model (always present), anything else stays.
    """
    if not isinstance(data, dict):
        raise ProviderError(
            f"bad_response: not a Messages API reply ({type(data).__name__})",
            retryable=True,
            outage=True,
        )
    usage = data.get("usage")
    content = data.get("content")
    if (
        data.get("type") != "message"
        or not isinstance(content, list)
        or not isinstance(usage, dict)
        or not isinstance(usage.get("input_tokens"), int)
        or not isinstance(usage.get("output_tokens"), int)
    ):
        present = isinstance(usage, dict) or bool(usage)
        kind = f"type={data.get('type')!r}, usage={'yes' if present else 'missing'}"
        raise ProviderError(
            f"bad_response: not a Messages API reply ({kind})", retryable=True, outage=True
        )
    cache_write = usage.get("cache_creation_input_tokens") or 0
    cache_read = usage.get("cache_read_input_tokens") or 0
    input_tokens = usage["input_tokens"] + cache_write + cache_read
    problem = None
    try:
        blocks = sanitize(content)
        if not all(isinstance(b, dict) for b in blocks):
            raise TypeError("a content block is not an object")
    except Exception as e:  # paid, but unreadable (as read_message)
        blocks, problem = [], f"{type(e).__name__}: {e}"[:200]
    stop_reason = data.get("stop_reason")
    model = data.get("model")
    return ProviderReply(
        problem=problem,
        content=blocks,
        input_tokens=input_tokens,
        output_tokens=usage["output_tokens"],
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
        model=model if isinstance(model, str) else "",
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_write,
    )


def status_error(status: int, text: str, retry_after: str | None) -> ProviderError:
    """The ProviderError of a non-2xx answer, worded as the SDK's APIStatusError maps to it:
    the body's `error.message`, else the SDK's own text ("Error code: 429 - {body}")."""
    text = text.strip()
    body: Any = text
    try:
        body = json.loads(text)
        message = f"Error code: {status} - {body}"
    except Exception:
        message = text or f"Error code: {status}"
    api_message = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        api_message = body["error"].get("message")
    return ProviderError(
        f"{status}: {api_message or message}"[:300],
        status=status,
        retryable=status in RETRYABLE_STATUSES,
        outage=status in OUTAGE_STATUSES,
        retry_after_s=parse_retry_after(retry_after),
    )


# The SDK's wording of a timeout and of a connection failure (APITimeoutError, APIConnectionError).
TIMEOUT_ERROR = "timeout: provider did not answer"
CONNECTION_ERROR = "connection: Connection error."
# The SDK's connection pool (DEFAULT_CONNECTION_LIMITS: 1,000 connections, idle 5 s).
POOL_LIMIT = 1000
POOL_KEEPALIVE_S = 5.0
ProviderPath = Literal["lean", "sdk"]


# How long a failed capabilities lookup is remembered before it is asked again.
CAPABILITIES_RETRY_S = 300.0
CAPABILITIES_TIMEOUT_S = 5.0


class AnthropicProvider:
    """One SDK client; the SDK's own retries are off so deadline, backoff and circuit are ours."""

    def __init__(
        self,
        api_key: str,
        base_url: str | None,
        timeout_s: float,
        path: ProviderPath = "lean",
        prompt_cache: bool = True,
    ) -> None:
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
        self.path = path
        # Mark the stable prefix for Anthropic's prompt cache (LLM_GATEWAY_PROMPT_CACHE).
        self.prompt_cache = prompt_cache
        # The lean path sends what the SDK would: its URL, auth, version and client headers
        # (the per-request `x-stainless-*` retry and timeout hints aside).
        self._messages_url = f"{str(self.client.base_url).rstrip('/')}/v1/messages"
        self._headers = {k: v for k, v in self.client.default_headers.items() if isinstance(v, str)}
        self._session: aiohttp.ClientSession | None = None

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
        """Close the HTTP connection pools (the lean path's and the SDK's)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
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

        `tools` is the structured output's forced tool (or None): sent as such, or as
        `output_config.format` (its `input_schema`) to a model on the json_schema path
        (`domain.structured`). `effort` goes out as `output_config.effort` when the model
        reports that level.
        """
        body: dict[str, Any] = {"max_tokens": max_tokens, "messages": messages, "model": model}
        if effort is not None and effort in await self.effort_levels(model):
            body["output_config"] = {"effort": effort}
        sent_system: str | list[dict[str, Any]] | None = system
        # Structured output per model (domain.structured): the forced tool, or the schema as
        # `output_config.format` for a model that answers a forced tool_choice with 400.
        forced = sent_tools(model, tools)
        if tools and forced is None:
            config = body.setdefault("output_config", {})
            config["format"] = output_format(tools[0]["input_schema"])
        if self.prompt_cache and cacheable(model, system, forced):
            # The stable prefix (tools, system) with its cache breakpoint: domain.prompt_cache.
            sent_system, forced = marked(system, forced)
        if sent_system:
            body["system"] = sent_system
        if forced:
            body["tools"] = forced
            body["tool_choice"] = {"type": "tool", "name": forced[0]["name"]}
        send = self._create_sdk if self.path == "sdk" else self._create_lean
        if not spans_recorded():
            # The span would be dropped at its start, and nothing carries its context onwards
            # (no traceparent towards the provider): not started at all (3 % of the CPU).
            return (await send(body, timeout_s))[0]
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
                reply, response_id = await send(body, timeout_s)
            except ProviderError as e:
                span.set_status(Status(StatusCode.ERROR, e.kind))
                span.set_attribute("error.type", e.kind)
                raise
            if span.is_recording():
                span.set_attribute("gen_ai.response.model", reply.model)
                span.set_attribute("gen_ai.response.id", response_id)
                span.set_attribute("gen_ai.usage.input_tokens", reply.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", reply.output_tokens)
                span.set_attribute(
                    "gen_ai.usage.cache_read.input_tokens", reply.cache_read_input_tokens
                )
                span.set_attribute(
                    "gen_ai.usage.cache_creation.input_tokens", reply.cache_creation_input_tokens
                )
                if reply.stop_reason:
                    span.set_attribute("gen_ai.response.finish_reasons", [reply.stop_reason])
            return reply

    def _client_session(self) -> aiohttp.ClientSession:
        """The lean path's pool, made on first use (inside the running loop)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=POOL_LIMIT, keepalive_timeout=POOL_KEEPALIVE_S
                ),
                # As the SDK's httpx client: proxies and certificates from the environment.
                trust_env=True,
            )
        return self._session

    async def _create_lean(
        self, body: dict[str, Any], timeout_s: float
    ) -> tuple[ProviderReply, str]:
        """One POST /v1/messages on aiohttp: the reply and its id; ProviderError otherwise."""
        try:
            # The SDK's serialiser (compact, UTF-8); a lone surrogate fails here as it does there.
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        except Exception as e:
            raise ProviderError(
                f"bad_response: {type(e).__name__}: {e}"[:300], retryable=True, outage=True
            ) from e
        # The SDK's aiohttp transport maps its one timeout to these three.
        timeout = aiohttp.ClientTimeout(
            sock_connect=timeout_s, sock_read=timeout_s, connect=timeout_s
        )
        try:
            async with self._client_session().post(
                self._messages_url,
                data=data,
                headers=self._headers,
                timeout=timeout,
                # The SDK's client follows redirects (a 307 keeps the method and the body).
                allow_redirects=True,
            ) as response:
                raw = await response.read()
                status = response.status
                content_type = response.headers.get("content-type", "*")
                retry_after = response.headers.get("retry-after")
        except TimeoutError as e:
            raise ProviderError(TIMEOUT_ERROR, retryable=True, outage=True) from e
        except (aiohttp.ClientError, OSError) as e:
            raise ProviderError(CONNECTION_ERROR, retryable=True, outage=True) from e
        if not 200 <= status < 300:
            raise status_error(status, raw.decode("utf-8", "replace"), retry_after)
        try:
            decoded = json.loads(raw)
        except Exception as e:
            if not content_type.split(";")[0].lower().endswith("json"):
                # The SDK hands back the body's text: not a Messages API reply.
                decoded = raw.decode("utf-8", "replace")
            else:
                raise ProviderError(
                    f"bad_response: {type(e).__name__}: {e}"[:300], retryable=True, outage=True
                ) from e
        reply = read_body(decoded)
        return reply, str(decoded.get("id"))

    async def _create_sdk(
        self, body: dict[str, Any], timeout_s: float
    ) -> tuple[ProviderReply, str]:
        """The same request through `client.messages.create`; ProviderError otherwise."""
        try:
            message = await self.client.messages.create(**body, timeout=timeout_s)
        except anthropic.APIStatusError as e:
            status = e.status_code
            raise ProviderError(
                f"{status}: {e.api_message or e.message}"[:300],
                status=status,
                retryable=status in RETRYABLE_STATUSES,
                outage=status in OUTAGE_STATUSES,
                retry_after_s=_retry_after(e.response),
            ) from e
        except anthropic.APITimeoutError as e:
            raise ProviderError(TIMEOUT_ERROR, retryable=True, outage=True) from e
        except anthropic.APIConnectionError as e:
            raise ProviderError(f"connection: {e}"[:300], retryable=True, outage=True) from e
        except Exception as e:
            # An answer the SDK could not read (junk JSON, a body it cannot parse): the
            # provider failed this request. Retried, and the circuit is told.
            raise ProviderError(
                f"bad_response: {type(e).__name__}: {e}"[:300], retryable=True, outage=True
            ) from e
        return read_message(message), str(getattr(message, "id", None))
