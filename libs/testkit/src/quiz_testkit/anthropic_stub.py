"""Anthropic Messages API stub server, scripted per call, for tests and benches."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
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

from quiz_testkit.demo_replies import DEMO_LABEL, demo_output, log_rule
from quiz_testkit.threaded_server import ThreadedServer

__all__ = [
    "CACHE_MIN_TOKENS",
    "FORCED_TOOL_REFUSED",
    "AnthropicStub",
    "RecordedRequest",
    "StubReply",
    "main",
    "minimal_instance",
    "realistic_instance",
]

ReplyKind = Literal[
    "tool",
    "malformed_tool",
    "text",
    "error",
    "slow",
    "auto",
    "realistic",
    "demo",
    "callable",
    "raw",
]

# Error `type` the real API puts in the body for each status.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Default messages worded like the real API's, for logs that read naturally.
ERROR_MESSAGES: dict[str, str] = {
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "overloaded_error": "Overloaded",
    "api_error": "Internal server error",
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
}

AUTO_TEXT = "Stub reply."
STUB_LABEL = "[stub reply, no model: plausible and schema-valid, the statement ignored]"
"""Prefixes each text a person reads of a `realistic()` reply (the stub's CLI without --demo):
its "42" for "2 + 2 ?" is no model's answer, and says so (issue 34)."""
# The fields of a reply a person reads as prose: the wand's and a fix's explanation, a finding's.
_PROSE_FIELDS = frozenset({"explanation", "message"})


def labelled_realistic(value: Any) -> Any:
    """`value` (a realistic instance) with every prose field (`explanation`, `message`, at any
    depth) prefixed by STUB_LABEL."""
    if isinstance(value, dict):
        return {
            k: f"{STUB_LABEL} {v}"
            if k in _PROSE_FIELDS and isinstance(v, str)
            else labelled_realistic(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [labelled_realistic(v) for v in value]
    return value


_MAX_SCHEMA_DEPTH = 32


@dataclass(frozen=True, slots=True)
class StubReply:
    """One scripted reply; build it with the class methods, not the constructor."""

    kind: ReplyKind
    payload: Any = None
    usage: Mapping[str, int] | None = None
    tool_name: str | None = None
    stop_reason: str = "end_turn"
    status: int = 200
    error_type: str | None = None
    message: str | None = None
    retry_after: float | None = None
    delay: float = 0.0
    inner: StubReply | None = None
    fn: Callable[[dict[str, Any]], StubReply] | None = None
    headers: Mapping[str, str] | None = None

    @classmethod
    def tool(
        cls,
        input: Mapping[str, Any],
        usage: Mapping[str, int] | None = None,
        *,
        name: str | None = None,
        stop_reason: str = "tool_use",
    ) -> StubReply:
        """A tool_use block with this input, named after the forced (else first) tool by default.

        `stop_reason="max_tokens"` simulates a tool call cut by the budget (its input partial).
        """
        return cls(
            "tool", payload=dict(input), usage=usage, tool_name=name, stop_reason=stop_reason
        )

    @classmethod
    def malformed_tool(
        cls, raw_input: Mapping[str, Any], usage: Mapping[str, int] | None = None
    ) -> StubReply:
        """A tool_use block whose input is sent as given, typically not matching the schema."""
        return cls("malformed_tool", payload=dict(raw_input), usage=usage, stop_reason="tool_use")

    @classmethod
    def text(
        cls, text: str, usage: Mapping[str, int] | None = None, *, stop_reason: str = "end_turn"
    ) -> StubReply:
        """A text block; `stop_reason="max_tokens"` simulates a truncated answer."""
        return cls("text", payload=text, usage=usage, stop_reason=stop_reason)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
    ) -> StubReply:
        """An error response with the real body shape and an optional `retry-after` header."""
        default_type = "api_error" if status >= 500 else "invalid_request_error"
        return cls(
            "error",
            status=status,
            error_type=error_type or ERROR_TYPES.get(status, default_type),
            message=message,
            retry_after=retry_after,
        )

    @classmethod
    def slow(cls, seconds: float, reply: StubReply) -> StubReply:
        """Wait `seconds` without blocking the server, then send `reply`."""
        return cls("slow", delay=seconds, inner=reply)

    @classmethod
    def auto(cls) -> StubReply:
        """The minimal valid instance of the forced tool's schema, else a short text."""
        return cls("auto")

    @classmethod
    def realistic(cls) -> StubReply:
        """A full, plausible instance of the forced tool's schema (`realistic_instance`), its
        prose labelled STUB_LABEL."""
        return cls("realistic")

    @classmethod
    def demo(cls) -> StubReply:
        """The demo mode's canned reply computed from the request (`quiz_testkit.demo_replies`:
        rules for the documented examples, labelled; `realistic()` for anything else)."""
        return cls("demo")

    @classmethod
    def callable(cls, fn: Callable[[dict[str, Any]], StubReply]) -> StubReply:
        """Decide per request: `fn(request_body)` returns the reply to send."""
        return cls("callable", fn=fn)

    @classmethod
    def raw(
        cls,
        status: int,
        body: str | bytes,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> StubReply:
        """Arbitrary bytes as the response body, e.g. malformed JSON."""
        data = body.encode() if isinstance(body, str) else body
        return cls("raw", status=status, payload=data, headers=headers)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A `POST /v1/messages` the stub received: JSON body and lower-cased headers."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _counted(key: str, value: Any) -> str:
    """What the stub counts of a part of the request: its JSON, where a system prompt sent as
    text blocks counts as its text and `cache_control` marks count nothing (Anthropic counts
    the prompt, not how it is framed: marking a prefix does not change input_tokens)."""
    if key == "system" and isinstance(value, list):
        value = "".join(b.get("text", "") for b in value if isinstance(b, dict))
    elif key == "tools" and isinstance(value, list):
        value = [
            {k: v for k, v in t.items() if k != "cache_control"} if isinstance(t, dict) else t
            for t in value
        ]
    return _dumps(value)


def estimate_input_tokens(body: Mapping[str, Any]) -> int:
    """Cheap token estimate of a request: JSON length of system, messages and tools over 4."""
    size = sum(
        len(_counted(key, body[key])) for key in ("system", "messages", "tools") if key in body
    )
    return max(1, size // 4)


# The minimum cacheable prefix per model (Anthropic's prompt-caching page); others: 1,024.
CACHE_MIN_TOKENS: dict[str, int] = {
    "claude-sonnet-5-5": 512,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
}
DEFAULT_CACHE_MIN_TOKENS = 1024
# Models that answer a forced tool_choice ({"type": "tool"} or {"type": "any"}) with 400
# ("What's new in Claude Sonnet 5.5" / "... Opus 5.5": forced tool use returns an error);
# dated variants (`<id>-…`) too. They take structured output as `output_config.format`.
FORCED_TOOL_REFUSED: frozenset[str] = frozenset(
    {"claude-sonnet-5-5", "claude-opus-5-5", "claude-fable-5-1"}
)
FORCED_TOOL_MESSAGE = 'tool_choice: type "tool" and "any" are not supported for this model.'


def refuses_forced_tool(model: str) -> bool:
    """Whether `model` (or the model it is a dated variant of) refuses a forced tool_choice."""
    return any(model == m or model.startswith(f"{m}-") for m in FORCED_TOOL_REFUSED)


# An entry lives 5 minutes from its last use (`cache_control: {"type": "ephemeral"}`).
CACHE_TTL_S = 300.0


def cached_prefix(body: Mapping[str, Any]) -> str | None:
    """The request's prefix up to its last cache breakpoint (tools, then system blocks), as
    the text the stub counts (`_counted`); None without a breakpoint there. Breakpoints in
    messages are not modelled (the gateway never sends one)."""
    raw_tools, raw_system = body.get("tools"), body.get("system")
    tools: list[Any] = raw_tools if isinstance(raw_tools, list) else []
    system: list[Any] = raw_system if isinstance(raw_system, list) else []
    marked_system = [
        i for i, b in enumerate(system) if isinstance(b, dict) and b.get("cache_control")
    ]
    if marked_system:
        counted_tools = _counted("tools", tools) if tools else ""
        return counted_tools + _counted("system", system[: marked_system[-1] + 1])
    marked_tools = [
        i for i, t in enumerate(tools) if isinstance(t, dict) and t.get("cache_control")
    ]
    if marked_tools:
        return _counted("tools", tools[: marked_tools[-1] + 1])
    return None


def _resolve_ref(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for part in ref.lstrip("#").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _dereferenced(root: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """A `$ref` schema as its target, refined by the `$ref`'s siblings (2020-12); the schemas
    we send only need a shallow merge."""
    target = dict(_resolve_ref(root, schema["$ref"]))
    target.update({k: v for k, v in schema.items() if k != "$ref"})
    return target


_FORMAT_EXAMPLES: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "a@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def _minimal_number(schema: Mapping[str, Any], integer: bool, variant: int) -> int | float:
    def bound(key: str) -> float | None:
        value = schema.get(key)
        # Draft-4 boolean exclusive flags are not used by tool schemas; ignore them.
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    low, high = bound("minimum"), bound("maximum")
    exclusive_low, exclusive_high = bound("exclusiveMinimum"), bound("exclusiveMaximum")
    step = bound("multipleOf")

    def fit(value: float) -> float:
        value = math.ceil(value / step) * step if step else value
        return math.ceil(value) if integer else value

    def valid(value: float) -> bool:
        return (
            (low is None or value >= low)
            and (high is None or value <= high)
            and (exclusive_low is None or value > exclusive_low)
            and (exclusive_high is None or value < exclusive_high)
        )

    if low is not None:
        start = low
    elif exclusive_low is not None:
        start = math.floor(exclusive_low) + 1 if integer else exclusive_low + 1
    else:
        start = 0
    # Smallest first; then the upper bounds and the middle for narrow or upper-bounded ranges.
    candidates = [start + variant, start]
    candidates += [
        v for v in (high, None if exclusive_high is None else exclusive_high - 1) if v is not None
    ]
    lower = low if low is not None else exclusive_low
    upper = high if high is not None else exclusive_high
    if lower is not None and upper is not None:
        candidates.append((lower + upper) / 2)
    fitted = next((fit(c) for c in candidates if valid(fit(c))), fit(start))
    return int(fitted) if integer else fitted


def _minimal(root: Mapping[str, Any], schema: Any, variant: int, depth: int) -> Any:
    if depth > _MAX_SCHEMA_DEPTH:
        raise ValueError("schema too deep (recursive $ref with required fields?)")
    if schema is True or not isinstance(schema, Mapping):
        return {}
    if "$ref" in schema:
        return _minimal(root, _dereferenced(root, schema), variant, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "allOf" in schema:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve_ref(root, part["$ref"]) if "$ref" in part else part
            for key, value in part.items():
                if key in ("properties", "$defs") and key in merged:
                    merged[key] = {**merged[key], **value}
                elif key == "required" and key in merged:
                    merged[key] = [*merged[key], *value]
                else:
                    merged[key] = value
        return _minimal(root, merged, variant, depth + 1)
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            return _minimal(root, schema[combinator][0], variant, depth + 1)

    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind is None:
        if "properties" in schema or "required" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"
        else:
            return {}

    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        return {
            name: _minimal(root, props.get(name, {}), variant, depth + 1)
            for name in schema.get("required", [])
        }
    if kind == "array":
        prefix: Sequence[Any] = schema.get("prefixItems", [])
        count = schema.get("minItems", 0)
        items = schema.get("items", {})
        # Distinct variants keep `uniqueItems` (and callers' own distinctness checks) satisfied.
        return [
            _minimal(root, prefix[i] if i < len(prefix) else items, i, depth + 1)
            for i in range(count)
        ]
    if kind == "string":
        if "format" in schema and schema["format"] in _FORMAT_EXAMPLES:
            return _FORMAT_EXAMPLES[schema["format"]]
        length = schema.get("minLength", 0)
        if variant and not length:
            length = 1
        length = min(length, schema.get("maxLength", length))
        return chr(ord("a") + variant % 26) * length
    if kind == "integer":
        return _minimal_number(schema, True, variant)
    if kind == "number":
        return _minimal_number(schema, False, variant)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    raise ValueError(f"unsupported schema type {kind!r}")


def minimal_instance(schema: Mapping[str, Any]) -> Any:
    """The smallest value valid against a JSON Schema (the subset tool schemas use)."""
    return _minimal(schema, schema, 0, 0)


# Plausible texts by property name, for `realistic_instance`: what a model would write there.
_PLAUSIBLE: dict[str, Callable[[int], str]] = {
    "text": lambda i: ["42", "24", "4.2", "420", "0.42"][i % 5],
    "label": lambda i: f"Group {chr(65 + i % 26)}",
    "name": lambda i: f"case {i + 1}",
    "stdin": lambda i: f"{i + 1} {i + 2}\n",
    "args": lambda i: f"--n={i + 1}",
    "value": lambda i: ["42", "42.0", "forty-two"][i % 3],
    "cards": lambda i: f"Card {i + 1}",
    "distractors": lambda i: f"Distractor {i + 1}",
    "reference": lambda i: "A model answer: the key idea, explained, with one example.",
    "referenceSolution": lambda i: "print(sum(map(int, input().split())))\n",
    "rubric": lambda i: "- States the key idea (2 pts)\n- Gives an example (1 pt)",
    "explanation": lambda i: "The right answer follows from the statement's own data.",
}


def _realistic(
    root: Mapping[str, Any],
    schema: Any,
    name: str,
    index: int,
    depth: int,
    counts: dict[str, int],
) -> Any:
    if depth > _MAX_SCHEMA_DEPTH:
        raise ValueError("schema too deep (recursive $ref with required fields?)")
    if schema is True or not isinstance(schema, Mapping):
        return {}
    if "$ref" in schema:
        return _realistic(root, _dereferenced(root, schema), name, index, depth + 1, counts)
    if "const" in schema or "enum" in schema or "allOf" in schema:
        return _minimal(root, schema, index, depth)
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            branches = [
                b
                for b in schema[combinator]
                if not (isinstance(b, Mapping) and b.get("type") == "null")
            ]
            first = (branches or schema[combinator])[0]
            return _realistic(root, first, name, index, depth + 1, counts)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0])
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind is None:
        return {}  # an untyped schema takes anything: an empty object, as minimal_instance does
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        return {
            key: _realistic(root, sub, key, index, depth + 1, counts) for key, sub in props.items()
        }
    if kind == "array":
        count = max(schema.get("minItems", 0), min(3, schema.get("maxItems", 3)))
        items = schema.get("items", {})
        return [_realistic(root, items, name, i, depth + 1, counts) for i in range(count)]
    if kind == "string":
        if "format" in schema or "pattern" in schema:
            return _minimal(root, schema, index, depth)
        # Each text of a name gets the next value, so list elements never repeat one another.
        seen = counts.get(name, 0)
        counts[name] = seen + 1
        text = _PLAUSIBLE.get(name, lambda i: f"Sample {name or 'text'} {i + 1}")(seen)
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        text = text.ljust(low, ".")
        return text[:high] if high is not None else text
    if kind == "boolean":
        return index == 0  # the first of a list is the right one: one key, the rest distractors
    if kind in ("integer", "number"):
        return 0 if name == "tolerance" else _minimal_number(schema, kind == "integer", index)
    if kind == "null":
        return None
    raise ValueError(f"unsupported schema type {kind!r}")


def realistic_instance(schema: Mapping[str, Any]) -> Any:
    """A full instance of a JSON Schema with plausible values: every property, three items a
    list, texts chosen by property name (`text`, `label`, `stdin`, `referenceSolution`…), the
    first boolean of a list true. Schemas using `pattern` or `format` get the minimal value.
    """
    return _realistic(schema, schema, "", 0, 0, {})


def _forced_tool(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The tool the request makes the model call, if any (`tool_choice` tool, or any → first)."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool":
        return next(
            (t for t in tools if t.get("name") == choice.get("name")), {"name": choice["name"]}
        )
    if choice.get("type") == "any" and tools:
        return tools[0]
    return None


def _output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema of structured outputs (`output_config.format`), if requested."""
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        return fmt.get("schema")
    return None


def _output_schema_name(body: Mapping[str, Any]) -> str:
    """The structured output's name, if it has one."""
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
    return str(fmt.get("name") or "output") if isinstance(fmt, Mapping) else "output"


def _error_body(error_type: str, message: str) -> bytes:
    return _dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()


def _error_response(status: int, error_type: str, message: str, request_id: str) -> Response:
    return Response(
        _error_body(error_type, message),
        status_code=status,
        media_type="application/json",
        headers={"request-id": request_id},
    )


def _sse(message: dict[str, Any]) -> bytes:
    """The whole event stream of `message`, sent in one body: the SDK parses it the same."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": _dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"index": index, "content_block": opening}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        ),
        ("message_stop", {}),
    ]
    return "".join(
        f"event: {name}\ndata: {_dumps({'type': name, **data})}\n\n" for name, data in events
    ).encode()


class AnthropicStub(ThreadedServer):
    """Messages API server on a background thread; replies come from a FIFO script or `default`."""

    name = "anthropic-stub"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default: StubReply | None = None,
        record_requests: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Configure; nothing listens until `start()`. `clock` (seconds) ages the prompt cache."""
        super().__init__(host, port)
        # The prompt cache as Anthropic keeps it: (model, prefix) -> expiry, 5 min from last use.
        self.clock = clock
        self._prompt_cache: dict[tuple[str, str], float] = {}
        self._initial_default = default or StubReply.auto()
        self.default = self._initial_default
        # Long-running CLI servers turn recording off so memory stays flat under benches.
        self.record_requests = record_requests
        self._lock = threading.Lock()
        self._script: collections.deque[StubReply] = collections.deque()
        # GET /v1/models/{id}: the effort levels each model reports (absent: no effort support).
        self.effort_levels: dict[str, list[str]] = {}
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        # Set on the server's loop when a stop begins: slow replies wake instead of waiting.
        self._stopping: asyncio.Event | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models/{model_id}", self._model, methods=["GET"]),
            ]
        )

    # -- scripting (test thread) -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Where to point `anthropic.Anthropic(base_url=...)`."""
        return f"http://{self.host}:{self.port}"

    def script(self, *replies: StubReply) -> None:
        """Queue replies for the next calls, in order."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def in_flight(self) -> int:
        """`POST /v1/messages` received and not yet answered (slow replies still waiting)."""
        with self._lock:
            return self._in_flight

    def reset(self) -> None:
        """Forget the script and recorded requests, and restore the initial default."""
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._prompt_cache.clear()
            self.effort_levels = {}
            self.default = self._initial_default

    # -- lifecycle (ThreadedServer) ---------------------------------------------------------

    def uvicorn_options(self) -> dict[str, Any]:
        # Longer than a client's idle gaps (benches alternate paths): a connection closed
        # while idle in a client's pool fails that client's next request on it.
        return {"timeout_keep_alive": 120}

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._stopping = asyncio.Event()
        await super()._serve(server, sock)

    def before_stop(self) -> None:
        # Wake slow replies so shutdown does not wait out (or cancel) their delays.
        if self._stopping is not None:
            self._stopping.set()

    # -- HTTP handlers (server thread) -------------------------------------------------------

    async def _read_json(self, request: Request, request_id: str) -> dict[str, Any] | Response:
        if "x-api-key" not in request.headers and "authorization" not in request.headers:
            return _error_response(
                401,
                "authentication_error",
                "x-api-key header is required",
                request_id,
            )
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return _error_response(
                400, "invalid_request_error", f"invalid JSON body: {exc}", request_id
            )
        if not isinstance(body, dict):
            return _error_response(
                400, "invalid_request_error", "body must be a JSON object", request_id
            )
        return body

    async def _model(self, request: Request) -> Response:
        """A ModelInfo whose `capabilities.effort` lists `effort_levels[model]`."""
        model = request.path_params["model_id"]
        levels = self.effort_levels.get(model, [])
        effort: dict[str, Any] = {"supported": bool(levels)}
        for level in ("low", "medium", "high", "xhigh", "max"):
            effort[level] = {"supported": level in levels}
        info = {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2025-01-01T00:00:00Z",
            "capabilities": {"effort": effort},
        }
        return Response(_dumps(info).encode(), media_type="application/json")

    async def _count_tokens(self, request: Request) -> Response:
        request_id = f"req_{uuid.uuid4().hex}"
        body = await self._read_json(request, request_id)
        if isinstance(body, Response):
            return body
        return Response(
            _dumps({"input_tokens": estimate_input_tokens(body)}).encode(),
            media_type="application/json",
            headers={"request-id": request_id},
        )

    async def _messages(self, request: Request) -> Response:
        with self._lock:
            self._in_flight += 1
        try:
            return await self._answer(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        request_id = f"req_{uuid.uuid4().hex}"
        body = await self._read_json(request, request_id)
        if isinstance(body, Response):
            return body
        with self._lock:
            if self.record_requests:
                self._requests.append(RecordedRequest(body, dict(request.headers)))
            missing = [k for k in ("model", "max_tokens", "messages") if k not in body]
            choice = body.get("tool_choice")
            refused = (
                not missing
                and isinstance(choice, dict)
                and choice.get("type") in ("tool", "any")
                and refuses_forced_tool(str(body.get("model")))
            )
            # A request the real API rejects must not eat a scripted reply meant for the retry.
            reply = (
                None
                if missing or refused
                else (self._script.popleft() if self._script else self.default)
            )
        if refused:
            return _error_response(400, "invalid_request_error", FORCED_TOOL_MESSAGE, request_id)
        if reply is None:
            message = f"{missing[0]}: Field required"
            return _error_response(400, "invalid_request_error", message, request_id)

        while reply.kind in ("slow", "callable"):
            if reply.kind == "slow":
                await self._sleep(reply.delay)
                reply = reply.inner or self.default
            elif reply.fn is not None:
                try:
                    reply = reply.fn(body)
                except Exception as exc:  # surfaced as a 500 so the test sees why
                    text = f"stub callable raised {type(exc).__name__}: {exc}"
                    return _error_response(500, "api_error", text, request_id)
        try:
            return self._render(reply, body, request_id)
        except Exception as exc:  # e.g. auto() on an unsupported schema: say so in the reply
            text = f"stub could not build the reply: {type(exc).__name__}: {exc}"
            return _error_response(500, "api_error", text, request_id)

    async def _sleep(self, seconds: float) -> None:
        stopping = self._stopping
        if stopping is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), seconds)

    def _render(self, reply: StubReply, body: dict[str, Any], request_id: str) -> Response:
        headers = {"request-id": request_id}
        if reply.kind == "raw":
            return Response(
                reply.payload,
                status_code=reply.status,
                headers={**headers, **(reply.headers or {})},
            )
        if reply.kind == "error":
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            error_type = reply.error_type or "api_error"
            error_text = reply.message or ERROR_MESSAGES.get(error_type, f"stub {error_type}")
            return Response(
                _error_body(error_type, error_text),
                status_code=reply.status,
                media_type="application/json",
                headers=headers,
            )

        content, stop_reason = self._content(reply, body)
        # A scripted usage is the whole usage (its cache counts 0 unless it names them): the
        # prompt cache is consulted only for replies that leave usage to the stub.
        if reply.usage is None:
            inputs = self._input_usage(body)
        else:
            inputs = {
                "input_tokens": estimate_input_tokens(body),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        usage = {
            **inputs,
            "output_tokens": max(1, len(_dumps(content)) // 4),
            **(reply.usage or {}),
        }
        message: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stub"),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if body.get("stream"):
            return Response(_sse(message), media_type="text/event-stream", headers=headers)
        return Response(_dumps(message).encode(), media_type="application/json", headers=headers)

    def _input_usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """The input side of `usage` as Anthropic reports it: a prefix marked cacheable and at
        least the model's minimum is read from the cache when the same model saw the same
        prefix within the last 5 minutes (`cache_read_input_tokens`, the entry's life renewed),
        else written to it (`cache_creation_input_tokens`); `input_tokens` is the rest."""
        total = estimate_input_tokens(body)
        prefix = cached_prefix(body)
        model = str(body.get("model", ""))
        tokens = len(prefix) // 4 if prefix is not None else 0
        usage = {
            "input_tokens": total,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        if prefix is None or tokens < CACHE_MIN_TOKENS.get(model, DEFAULT_CACHE_MIN_TOKENS):
            return usage
        tokens = min(tokens, total)
        now = self.clock()
        with self._lock:
            hit = self._prompt_cache.get((model, prefix), float("-inf")) > now
            self._prompt_cache[(model, prefix)] = now + CACHE_TTL_S
        usage["cache_read_input_tokens" if hit else "cache_creation_input_tokens"] = tokens
        usage["input_tokens"] = total - tokens
        return usage

    def _content(self, reply: StubReply, body: dict[str, Any]) -> tuple[list[Any], str]:
        forced = _forced_tool(body)
        if reply.kind == "demo":
            schema = (forced or {}).get("input_schema") or _output_schema(body)
            name = str((forced or {}).get("name") or (_output_schema_name(body)))
            if schema is None:
                reply = StubReply.text(f"{DEMO_LABEL} {AUTO_TEXT}")
            else:
                output, rule = demo_output(name, body, realistic_instance(schema))
                log_rule(name, rule)
                is_tool = forced is not None
                reply = StubReply.tool(output) if is_tool else StubReply.text(_dumps(output))
        if reply.kind == "realistic":
            if forced is not None:
                made = realistic_instance(forced.get("input_schema") or {})
                reply = StubReply.tool(labelled_realistic(made))
            elif (schema := _output_schema(body)) is not None:
                reply = StubReply.text(_dumps(labelled_realistic(realistic_instance(schema))))
            else:
                reply = StubReply.text(f"{STUB_LABEL} {AUTO_TEXT}")
        if reply.kind == "auto":
            if forced is not None:
                reply = StubReply.tool(minimal_instance(forced.get("input_schema") or {}))
            elif (schema := _output_schema(body)) is not None:
                reply = StubReply.text(_dumps(minimal_instance(schema)))
            else:
                reply = StubReply.text(AUTO_TEXT)
        if reply.kind in ("tool", "malformed_tool") and forced is None and _output_schema(body):
            # Structured outputs answer in a text block of JSON: a scripted structured answer
            # (valid or not) comes back that way to a json_schema request.
            stop = "max_tokens" if reply.stop_reason == "max_tokens" else "end_turn"
            return [{"type": "text", "text": _dumps(reply.payload)}], stop
        if reply.kind == "text":
            return [{"type": "text", "text": reply.payload}], reply.stop_reason
        tools = body.get("tools") or [{}]
        name = reply.tool_name or (forced or tools[0]).get("name") or "tool"
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": name,
            "input": reply.payload,
        }
        return [block], reply.stop_reason if reply.kind == "tool" else "tool_use"


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the stub in the foreground, answering `realistic()` replies, until interrupted.

    Without a script, every forced tool call gets a full, plausible, schema-valid input, so
    `make run` with the stub shows real merges (ADR-059's wand fills choices, cases, columns).
    """
    parser = argparse.ArgumentParser(prog="python -m quiz_testkit.anthropic_stub")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="model latency to simulate per reply (benches)"
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="canned replies computed from each request for the documented examples, labelled "
        f"{DEMO_LABEL!r} (quiz_testkit.demo_replies); realistic ones for anything else",
    )
    args = parser.parse_args(argv)
    default = StubReply.demo() if args.demo else StubReply.realistic()
    if args.delay_ms > 0:
        default = StubReply.slow(args.delay_ms / 1000, default)
    stub = AnthropicStub(args.host, args.port, default=default, record_requests=False)
    mode = f"DEMO mode, every reply canned {DEMO_LABEL}" if args.demo else "realistic replies"
    stub.serve_forever(lambda: f"anthropic stub listening on {stub.base_url} ({mode})")


if __name__ == "__main__":
    main()
