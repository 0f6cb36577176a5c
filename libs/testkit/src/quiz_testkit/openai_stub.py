"""OpenAI chat-completions stub server, scripted per call, for tests (issue 31).

Speaks what a self-hosted OpenAI-compatible server (vLLM, llama.cpp's server, Ollama,
LocalAI) answers at `POST /v1/chat/completions`: a forced function call (`tools` +
`tool_choice` naming the function), `response_format: json_schema`, free text, `usage`
(`prompt_tokens`, `completion_tokens`), `finish_reason: length`, and errors with OpenAI's body
(`{"error": {"message", "type", "code"}}`), `retry-after` on a 429. Modelled on
`quiz_testkit.anthropic_stub` (the same scripting: a FIFO of `ChatReply`, else `default`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from quiz_testkit.anthropic_stub import minimal_instance, realistic_instance
from quiz_testkit.threaded_server import ThreadedServer

__all__ = ["ChatReply", "OpenAIStub", "RecordedChat", "main"]

ChatKind = Literal["call", "text", "error", "slow", "auto", "realistic", "callable", "raw"]

# The error `type` OpenAI's API (and vLLM's imitation of it) puts in the body per status.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}
AUTO_TEXT = "Stub chat reply."


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One scripted reply; build it with the class methods."""

    kind: ChatKind
    payload: Any = None
    usage: Mapping[str, int] | None = None
    finish_reason: str | None = None
    name: str | None = None
    status: int = 200
    message: str | None = None
    retry_after: float | None = None
    delay: float = 0.0
    inner: ChatReply | None = None
    fn: Callable[[dict[str, Any]], ChatReply] | None = None
    headers: Mapping[str, str] | None = None

    @classmethod
    def call(
        cls,
        arguments: Mapping[str, Any] | str,
        usage: Mapping[str, int] | None = None,
        *,
        name: str | None = None,
        finish_reason: str = "tool_calls",
    ) -> ChatReply:
        """The structured answer: a function call (mode `tools`) with these arguments, or the
        same object as the message's text when the request asked `response_format`.

        A `str` is sent as the raw `arguments` (e.g. broken JSON); `name` defaults to the
        forced function's; `finish_reason="length"` is a call cut by max_tokens.
        """
        return cls("call", payload=arguments, usage=usage, name=name, finish_reason=finish_reason)

    @classmethod
    def text(
        cls, text: str, usage: Mapping[str, int] | None = None, *, finish_reason: str = "stop"
    ) -> ChatReply:
        """A text answer; `finish_reason="length"` simulates one cut by max_tokens."""
        return cls("text", payload=text, usage=usage, finish_reason=finish_reason)

    @classmethod
    def error(
        cls, status: int, *, retry_after: float | None = None, message: str | None = None
    ) -> ChatReply:
        """An error with OpenAI's body shape and an optional `retry-after` header."""
        return cls("error", status=status, retry_after=retry_after, message=message)

    @classmethod
    def slow(cls, seconds: float, reply: ChatReply) -> ChatReply:
        """Wait `seconds` without blocking the server, then send `reply`."""
        return cls("slow", delay=seconds, inner=reply)

    @classmethod
    def auto(cls) -> ChatReply:
        """The minimal valid instance of the forced function's (or response_format's) schema,
        else a short text."""
        return cls("auto")

    @classmethod
    def realistic(cls) -> ChatReply:
        """A full, plausible instance of the schema (`realistic_instance`)."""
        return cls("realistic")

    @classmethod
    def callable(cls, fn: Callable[[dict[str, Any]], ChatReply]) -> ChatReply:
        """Decide per request: `fn(request_body)` returns the reply to send."""
        return cls("callable", fn=fn)

    @classmethod
    def raw(
        cls, status: int, body: str | bytes, *, headers: Mapping[str, str] | None = None
    ) -> ChatReply:
        """Arbitrary bytes as the response body, e.g. a 200 without usage, or HTML."""
        data = body.encode() if isinstance(body, str) else body
        return cls("raw", status=status, payload=data, headers=headers)


@dataclass(frozen=True, slots=True)
class RecordedChat:
    """A `POST /v1/chat/completions` the stub received: JSON body and lower-cased headers."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """Cheap token estimate of a request: JSON length of messages and tools over 4."""
    size = sum(len(_dumps(body[k])) for k in ("messages", "tools", "response_format") if k in body)
    return max(1, size // 4)


def forced_function(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The function the request forces (`tool_choice: {type: function, function: {name}}`, or
    `required` → the first), with its `parameters`; None otherwise."""
    tools = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, dict)]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == name), {"name": name})
    if choice == "required" and tools:
        return tools[0]
    return None


def response_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of `response_format: {type: json_schema, json_schema: {schema}}` (or of the
    older `{type: json_object, schema}` llama-cpp-python's server takes), if asked."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return fmt.get("schema") or {}
    return None


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    error_type = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request")
    body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    return Response(
        _dumps(body).encode(),
        status_code=status,
        media_type="application/json",
        headers=dict(headers or {}),
    )


class OpenAIStub(ThreadedServer):
    """Chat-completions server on a background thread; replies from a FIFO script or `default`.

    `api_key`: when set, a request without `Authorization: Bearer <api_key>` is a 401 (vLLM's
    `--api-key`); None accepts any.
    """

    name = "openai-stub"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default: ChatReply | None = None,
        api_key: str | None = None,
        record_requests: bool = True,
    ) -> None:
        super().__init__(host, port)
        self._initial_default = default or ChatReply.auto()
        self.default = self._initial_default
        self.api_key = api_key
        self.record_requests = record_requests
        self._lock = threading.Lock()
        self._script: collections.deque[ChatReply] = collections.deque()
        self._requests: list[RecordedChat] = []
        self._stopping: asyncio.Event | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # -- scripting (test thread) -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Where to point `openai.OpenAI(base_url=...)` (and OPENAI_COMPAT_BASE_URL)."""
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *replies: ChatReply) -> None:
        """Queue replies for the next calls, in order."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedChat]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Forget the script and recorded requests, and restore the initial default."""
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self.default = self._initial_default

    # -- lifecycle ---------------------------------------------------------------------------

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._stopping = asyncio.Event()
        await super()._serve(server, sock)

    def before_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _sleep(self, seconds: float) -> None:
        stopping = self._stopping
        if stopping is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), seconds)

    # -- HTTP handlers (server thread) -------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        return Response(
            _dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}).encode(),
            media_type="application/json",
        )

    async def _chat(self, request: Request) -> Response:
        if self.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return _error(401, "Incorrect API key provided")
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return _error(400, f"invalid JSON body: {exc}")
        if not isinstance(body, dict):
            return _error(400, "body must be a JSON object")
        with self._lock:
            if self.record_requests:
                self._requests.append(RecordedChat(body, dict(request.headers)))
            missing = [k for k in ("model", "messages") if k not in body]
            reply = None if missing else (self._script.popleft() if self._script else self.default)
        if reply is None:
            return _error(400, f"{missing[0]}: Field required")
        while reply.kind in ("slow", "callable"):
            if reply.kind == "slow":
                await self._sleep(reply.delay)
                reply = reply.inner or self.default
            elif reply.fn is not None:
                try:
                    reply = reply.fn(body)
                except Exception as exc:  # surfaced as a 500 so the test sees why
                    return _error(500, f"stub callable raised {type(exc).__name__}: {exc}")
        try:
            return self._render(reply, body)
        except Exception as exc:  # e.g. auto() on an unsupported schema: say so in the reply
            return _error(500, f"stub could not build the reply: {type(exc).__name__}: {exc}")

    def _render(self, reply: ChatReply, body: dict[str, Any]) -> Response:
        if reply.kind == "raw":
            return Response(reply.payload, status_code=reply.status, headers=reply.headers)
        if reply.kind == "error":
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            default = "Rate limit reached" if reply.status == 429 else "Internal server error"
            return _error(reply.status, reply.message or default, headers)
        message, finish = self._message(reply, body)
        completion_tokens = max(1, len(_dumps(message)) // 4)
        usage = {
            "prompt_tokens": prompt_tokens(body),
            "completion_tokens": completion_tokens,
            **(reply.usage or {}),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": usage,
        }
        return Response(_dumps(completion).encode(), media_type="application/json")

    def _message(self, reply: ChatReply, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        forced = forced_function(body)
        schema = response_schema(body)
        if reply.kind in ("auto", "realistic"):
            make = minimal_instance if reply.kind == "auto" else realistic_instance
            if forced is not None:
                reply = ChatReply.call(make(forced.get("parameters") or {}))
            elif schema is not None:
                reply = ChatReply.call(make(schema))
            else:
                reply = ChatReply.text(AUTO_TEXT)
        if reply.kind == "text":
            return {"role": "assistant", "content": reply.payload}, reply.finish_reason or "stop"
        # A structured answer: a function call when one is forced, else the JSON as text.
        arguments = reply.payload if isinstance(reply.payload, str) else _dumps(reply.payload)
        if forced is None and schema is not None:
            finish = "stop" if reply.finish_reason == "tool_calls" else reply.finish_reason
            return {"role": "assistant", "content": arguments}, finish or "stop"
        name = reply.name or (forced or {}).get("name") or "function"
        call = {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return message, reply.finish_reason or "tool_calls"


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the stub in the foreground with realistic replies, until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m quiz_testkit.openai_stub")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8198)
    args = parser.parse_args(argv)
    stub = OpenAIStub(args.host, args.port, default=ChatReply.realistic(), record_requests=False)
    stub.serve_forever(lambda: f"openai stub listening on {stub.base_url}")


if __name__ == "__main__":
    main()
