"""The gateway's Messages-shaped request and reply, in and out of OpenAI chat completions.

The gateway thinks in Anthropic's shapes (issue 31 keeps one validation path): a system text,
messages whose content is a string or blocks (`text`, `tool_use`, `tool_result`), tools as
`{name, description, input_schema}`, a reply as content blocks and a `stop_reason`. An
OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, LocalAI) speaks chat completions;
these pure functions translate both ways, so `domain.output` reads and validates its answers
exactly as it reads Anthropic's, and `retry_messages` builds the second attempt unchanged.

Structured output goes out one of two ways (OPENAI_COMPAT_STRUCTURED):
- `tools` (default): the forced tool as a function and `tool_choice` naming it; the call's
  `arguments` (a JSON string) become the `tool_use` block's input.
- `json_schema`: `response_format: {type: json_schema}` with the tool's schema; the reply's
  text, parsed, becomes that `tool_use` block (servers whose function calling is weak but whose
  grammar-constrained decoding is sound, e.g. llama.cpp's).
- `json_object`: `response_format: {type: json_object, schema}`, the older form that
  llama-cpp-python's server takes (it refuses `json_schema` with a 500), read as `json_schema`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

StructuredMode = Literal["tools", "json_schema", "json_object"]

# finish_reason → the stop_reason the gateway judges by: `length` is a cut reply
# (attempts._judge refuses a structured one as `cut`, as Anthropic's `max_tokens`).
STOP_REASONS: dict[str, str] = {
    "length": "max_tokens",
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}

# The id a reply's json_schema output gets as a tool_use block (no call id exists there).
JSON_SCHEMA_CALL_ID = "json_schema_output"


def _text_of(content: Any) -> str:
    """The text of a block list's `text` blocks (or a tool_result's content), joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def chat_messages(
    system: str | None, messages: list[dict[str, Any]], mode: StructuredMode
) -> list[dict[str, Any]]:
    """Messages-API turns as chat-completions messages.

    `tool_use` blocks become the assistant's `tool_calls` (mode `tools`) or its JSON text
    (mode `json_schema`, where the model answered in text); `tool_result` blocks become `tool`
    messages, resp. user text, so the second attempt tells the model what was wrong.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        uses = [b for b in content if b.get("type") == "tool_use"]
        results = [b for b in content if b.get("type") == "tool_result"]
        if role == "assistant":
            if mode != "tools":
                texts += [json.dumps(b.get("input"), ensure_ascii=False) for b in uses]
                uses = []
            turn: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if uses:
                turn["tool_calls"] = [
                    {
                        "id": str(b.get("id") or f"call_{i}"),
                        "type": "function",
                        "function": {
                            "name": b.get("name"),
                            "arguments": json.dumps(b.get("input"), ensure_ascii=False),
                        },
                    }
                    for i, b in enumerate(uses)
                ]
            out.append(turn)
            continue
        for result in results:
            if mode == "tools":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(result.get("tool_use_id")),
                        "content": _text_of(result.get("content")),
                    }
                )
            else:
                texts.insert(0, _text_of(result.get("content")))
        if texts:
            out.append({"role": role, "content": "\n".join(texts)})
    return out


def chat_request(
    *,
    model: str,
    system: str | None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    max_tokens: int,
    mode: StructuredMode,
) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for one gateway request.

    `model`: the id the server knows (`wire_model`). The first tool is the forced one
    (`domain.output.forced_tool`), as for Anthropic.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(system, messages, mode),
        "max_tokens": max_tokens,
    }
    if tools:
        forced = tools[0]
        if mode == "tools":
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description") or "",
                        "parameters": t["input_schema"],
                    },
                }
                for t in tools
            ]
            body["tool_choice"] = {"type": "function", "function": {"name": forced["name"]}}
        elif mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": forced["name"], "schema": forced["input_schema"]},
            }
        else:
            body["response_format"] = {"type": "json_object", "schema": forced["input_schema"]}
    return body


def reply_blocks(
    message: dict[str, Any], finish_reason: str | None, forced: str | None, mode: StructuredMode
) -> tuple[list[dict[str, Any]], str | None]:
    """A chat completion's message as Messages-API content blocks, and the stop_reason.

    `forced`: the forced tool's name (None for a free-text request). A tool call's arguments
    that are not JSON become a `tool_use` whose input is the raw string, which
    `read_tool_output` finds unreadable (not an object) and asks again, as for Anthropic. In
    mode `json_schema` the text is parsed into the forced tool's input the same way.
    """
    stop = STOP_REASONS.get(finish_reason, finish_reason) if finish_reason else None
    blocks: list[dict[str, Any]] = []
    text = message.get("content")
    calls = message.get("tool_calls") or []
    if forced is not None and mode != "tools":
        if isinstance(text, str) and text.strip():
            blocks.append(
                {
                    "type": "tool_use",
                    "id": JSON_SCHEMA_CALL_ID,
                    "name": forced,
                    "input": _parsed(text),
                }
            )
        return blocks, stop
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    for call in calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or "call_0"),
                "name": function.get("name"),
                "input": _parsed(function.get("arguments")),
            }
        )
    return blocks, stop


def _parsed(arguments: Any) -> Any:
    """A JSON string decoded; anything that is not JSON stays as it came."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
