"""A self-hosted OpenAI-compatible server behind the same narrow call as Anthropic (issue 31).

vLLM, llama.cpp's server, Ollama and LocalAI all speak chat completions at
`OPENAI_COMPAT_BASE_URL` (`http://host:port/v1`). The maintained `openai` SDK is the client, its
own retries off (`max_retries=0`): the gateway's retries, backoff, circuit and deadlines
(`call/retries.py`) apply as they do to Anthropic, because every outcome maps to the same
`ProviderReply` or `ProviderError` — 408/429/5xx and timeouts retryable, 5xx and timeouts
opening the circuit, `retry-after` believed as far as `parse_retry_after` does.

The request and the reply are translated by `domain.openai_chat` to and from the Messages
shapes, so structured output is validated by `domain.output` exactly as today, and a reply
stopped by `finish_reason: length` is judged cut (`max_tokens`).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import openai
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
from quiz_llm_gateway.domain.openai_chat import StructuredMode, chat_request, reply_blocks
from quiz_llm_gateway.domain.providers import wire_model
from quiz_servicekit.telemetry import spans_recorded

_tracer = trace.get_tracer("quiz.llm_gateway.openai_compat")
log = logging.getLogger(__name__)

# Worded as the Anthropic provider's, so logs and ledger details read alike for both.
TIMEOUT_ERROR = "timeout: provider did not answer"
CONNECTION_ERROR = "connection: Connection error."
# A server run without keys (llama.cpp, Ollama) ignores the header; the SDK insists on one.
NO_KEY = "no-key"


def _refused(error: BaseException) -> bool:
    """Whether a "timeout" is a connection that failed at once (refused, no route).

    The SDK's aiohttp transport maps every `ClientConnectionError` to a connect timeout; the
    gateway must not read a server that is down as a caller's deadline (`call/retries.py`
    treats a timeout shorter than provider_timeout_s as the deadline passing).
    """
    seen: BaseException | None = error
    for _ in range(8):  # the SDK's, the transport's and aiohttp's exceptions: a short chain
        if seen is None:
            return False
        if isinstance(seen, aiohttp.ClientConnectorError) and not isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _bad_response(what: str) -> ProviderError:
    # A 200 that is not a chat completion: the provider failed this request (as Anthropic's).
    return ProviderError(
        f"bad_response: not a chat completion ({what})"[:300], retryable=True, outage=True
    )


def read_completion(
    data: Any, model: str, forced: str | None, mode: StructuredMode, max_tokens: int | None = None
) -> ProviderReply:
    """The parts of a chat completion (a decoded JSON object) the gateway uses.

    Usage from `usage.prompt_tokens` / `completion_tokens`; no usage, no choice: ProviderError
    `bad_response` (nothing can be billed from it). `model`: the gateway's id of the model
    (`openai-compat/…`), which the ledger names. A reply whose `completion_tokens` reached
    `max_tokens` is read as cut (`max_tokens`) whatever its finish_reason: llama-cpp-python's
    server answers a forced call cut mid-arguments with `tool_calls` (seen in the manual run).
    """
    if not isinstance(data, dict):
        raise _bad_response(type(data).__name__)
    usage = data.get("usage")
    choices = data.get("choices")
    if (
        not isinstance(usage, dict)
        or not isinstance(usage.get("prompt_tokens"), int)
        or not isinstance(usage.get("completion_tokens"), int)
        or not isinstance(choices, list)
        or not choices
        or not isinstance(choices[0], dict)
        or not isinstance(choices[0].get("message"), dict)
    ):
        usage_state = "yes" if isinstance(usage, dict) else "missing"
        raise _bad_response(f"object={data.get('object')!r}, usage={usage_state}")
    choice = choices[0]
    problem = None
    try:
        blocks, stop = reply_blocks(
            sanitize(choice["message"]), choice.get("finish_reason"), forced, mode
        )
    except Exception as e:  # paid (usage read), but its content cannot be: settled, llm_failed
        blocks, stop, problem = [], None, f"{type(e).__name__}: {e}"[:200]
    if max_tokens is not None and usage["completion_tokens"] >= max_tokens:
        stop = "max_tokens"
    return ProviderReply(
        content=blocks,
        input_tokens=usage["prompt_tokens"],
        output_tokens=usage["completion_tokens"],
        stop_reason=stop,
        model=model,
        problem=problem,
    )


def status_error(error: openai.APIStatusError) -> ProviderError:
    """The ProviderError of a non-2xx answer: the body's `error.message` when it has one."""
    status = error.status_code
    body = error.body
    message = body.get("message") if isinstance(body, dict) else None
    try:
        retry_after = error.response.headers.get("retry-after")
    except AttributeError:
        retry_after = None
    return ProviderError(
        f"{status}: {message or error.message}"[:300],
        status=status,
        retryable=status in RETRYABLE_STATUSES,
        outage=status in OUTAGE_STATUSES,
        retry_after_s=parse_retry_after(retry_after),
    )


class OpenAICompatProvider:
    """One `AsyncOpenAI` client on the server's base URL; the `Provider` protocol's `create`.

    `api_key`: OPENAI_COMPAT_API_KEY (vLLM's `--api-key`, LocalAI's keys), None for a server
    without one. `structured`: how a forced tool goes out (`domain.openai_chat`).
    """

    kind = "openai-compat"

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        structured: StructuredMode = "tools",
    ) -> None:
        self.base_url = base_url
        self.structured: StructuredMode = structured
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            max_retries=0,
            timeout=timeout_s,
            # As the Anthropic client: aiohttp, cheaper per call than httpx's pool (issue 10).
            http_client=openai.DefaultAioHttpClient(timeout=timeout_s),
        )

    async def close(self) -> None:
        """Close the client's connection pool."""
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
        """One chat completion; raises ProviderError on any failure.

        `model` is the gateway's `openai-compat/<model>`; the server is asked for `<model>`.
        `effort` has no chat-completions equivalent every server knows: not sent.
        """
        body = chat_request(
            model=wire_model(model),
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=max_tokens,
            mode=self.structured,
        )
        forced = tools[0]["name"] if tools else None
        if not spans_recorded():
            return (await self._send(body, timeout_s, model, forced))[0]
        # OTel GenAI semantic conventions, as for Anthropic: one CLIENT span per request.
        with _tracer.start_as_current_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.system": "openai",
                "gen_ai.request.model": body["model"],
                "gen_ai.request.max_tokens": max_tokens,
                "server.address": self.base_url,
                "quiz.llm.purpose": purpose,
            },
        ) as span:
            try:
                reply, response_id = await self._send(body, timeout_s, model, forced)
            except ProviderError as e:
                span.set_status(Status(StatusCode.ERROR, e.kind))
                span.set_attribute("error.type", e.kind)
                raise
            if span.is_recording():
                span.set_attribute("gen_ai.response.id", response_id)
                span.set_attribute("gen_ai.usage.input_tokens", reply.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", reply.output_tokens)
                if reply.stop_reason:
                    span.set_attribute("gen_ai.response.finish_reasons", [reply.stop_reason])
            return reply

    async def _send(
        self, body: dict[str, Any], timeout_s: float, model: str, forced: str | None
    ) -> tuple[ProviderReply, str]:
        try:
            completion = await self.client.chat.completions.create(**body, timeout=timeout_s)
        except openai.APIStatusError as e:
            raise status_error(e) from e
        except openai.APITimeoutError as e:
            if _refused(e):
                raise ProviderError(CONNECTION_ERROR, retryable=True, outage=True) from e
            raise ProviderError(TIMEOUT_ERROR, retryable=True, outage=True) from e
        except openai.APIConnectionError as e:
            raise ProviderError(f"connection: {e}"[:300], retryable=True, outage=True) from e
        except Exception as e:
            # An answer the SDK could not read (junk JSON): the provider failed this request.
            raise ProviderError(
                f"bad_response: {type(e).__name__}: {e}"[:300], retryable=True, outage=True
            ) from e
        # The SDK builds its model without validating: read the plain JSON it was made from.
        if hasattr(completion, "model_dump"):
            data: Any = completion.model_dump(mode="json", exclude_unset=True)
        else:  # a 200 whose body was not JSON comes back as its text
            data = completion
        reply = read_completion(data, model, forced, self.structured, body.get("max_tokens"))
        return reply, str(data.get("id")) if isinstance(data, dict) else ""
