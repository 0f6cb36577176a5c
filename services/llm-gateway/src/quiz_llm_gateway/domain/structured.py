"""How a model is asked for structured output (issue 31 follow-up). Pure.

Two ways to the Messages API, per model:
- `"tool"`: the output schema as the one tool, forced with `tool_choice: {"type": "tool"}`;
  the answer is that tool call's input (`domain.output.read_tool_output`).
- `"json_schema"`: `output_config: {"format": {"type": "json_schema", "schema": <schema>}}`
  (Anthropic's "Structured outputs" page, platform.claude.com/docs/en/build-with-claude/
  structured-outputs); the answer is the text block, read as JSON and validated the same
  way (`domain.output.read_json_output`).

Claude Sonnet 5.5, Opus 5.5 and Fable 5.1 answer a forced `tool_choice` (`"tool"` or `"any"`)
with a 400 `invalid_request_error` ("What's new in Claude Sonnet 5.5" / "What's new in Claude
Opus 5.5", platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5: "Forced tool
use returns an error"), so they take the json_schema path; the earlier models listed keep
the forced tool, which the gateway has always sent them.

An unknown Claude id takes the json_schema path: an id this table does not know is newer
than it (a new model, as the price table assumes), every Claude generation since 5.5 refuses
a forced tool — a 400 is final, no retry or fallback answers it — while JSON outputs are
generally available on every model since the 4.5 generation. An id of another provider
(`openai-compat/…`) is not the Messages API: it keeps the tool shape its provider maps.
"""

from __future__ import annotations

from typing import Any, Final, Literal

StructuredPath = Literal["tool", "json_schema"]

# Per listed model: how it is asked for structured output. `claude-sonnet-5` is left out on
# purpose (as in domain.pricing): as a prefix of `claude-sonnet-5-5` it would give a Sonnet
# 5.5 id without its date's dash (`claude-sonnet-5-520261001`) the forced tool; unlisted, it
# takes json_schema, which it supports too.
STRUCTURED_PATHS: Final[dict[str, StructuredPath]] = {
    "claude-sonnet-5-5": "json_schema",
    "claude-opus-5-5": "json_schema",
    "claude-fable-5-1": "json_schema",
    "claude-haiku-4-5": "tool",
    "claude-sonnet-4-5": "tool",
    "claude-sonnet-4-6": "tool",
    "claude-opus-4-5": "tool",
    "claude-opus-4-6": "tool",
}
UNKNOWN_CLAUDE_PATH: Final[StructuredPath] = "json_schema"


def listed(model: str) -> str | None:
    """The table's id whose row `model` takes: itself, else the longest listed id it starts
    with followed by "-" (a dated variant, `claude-sonnet-5-5-20261001`), as pricing does."""
    if model in STRUCTURED_PATHS:
        return model
    variants = [m for m in STRUCTURED_PATHS if model.startswith(f"{m}-")]
    return max(variants, key=len) if variants else None


def structured_path(model: str) -> StructuredPath:
    """How `model` is asked for structured output: its row, else json_schema for any other
    Claude id (the safe path, see the module's note), else the forced tool."""
    row = listed(model)
    if row is not None:
        return STRUCTURED_PATHS[row]
    return UNKNOWN_CLAUDE_PATH if model.startswith("claude-") else "tool"


def output_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The `output_config.format` of a json_schema request."""
    return {"type": "json_schema", "schema": schema}


def sent_tools(model: str, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The tools a request to `model` carries: the forced tool on the tool path, none on the
    json_schema path (its schema goes in `output_config.format`). Also the tools of the
    stable prefix prompt caching marks (`domain.prompt_cache`): on the json_schema path
    that prefix is the system prompt alone."""
    if tools and structured_path(model) == "json_schema":
        return None
    return tools
