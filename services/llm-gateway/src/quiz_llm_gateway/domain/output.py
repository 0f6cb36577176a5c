"""Structured output: the forced tool, schema validation and the message that asks once more."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MAX_ERRORS_REPORTED = 5


class InvalidSchema(ValueError):
    """The caller's JSON Schema is not a valid object schema: invalid_request."""


def check_schema(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for the schema, refusing non-object or malformed schemas."""
    if schema.get("type") != "object":
        raise InvalidSchema("output schema must have type 'object' (it becomes a tool input)")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidSchema(f"output schema is not valid JSON Schema: {exc.message}") from exc
    return Draft202012Validator(schema)


def cached_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """check_schema, remembered per schema text: meta-validation costs milliseconds."""
    return _validator_for(json.dumps(schema, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=256)
def _validator_for(schema_text: str) -> Draft202012Validator:
    return check_schema(json.loads(schema_text))


def forced_tool(name: str, schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    """The one tool the model must call; its input is the structured output."""
    return {
        "name": name,
        "description": description or f"Return the {name} result. Call this tool exactly once.",
        "input_schema": schema,
    }


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why a reply could not be read, in words the model can act on."""

    problem: str
    tool_use_id: str | None = None
    raw_input: Any = None


def read_tool_output(
    content: list[dict[str, Any]], name: str, validator: Draft202012Validator
) -> dict[str, Any] | Unreadable:
    """The validated tool input of the reply, or what was wrong with it."""
    uses = [b for b in content if b.get("type") == "tool_use"]
    if not uses:
        return Unreadable(f"You did not call the tool {name!r}. Call it with the result.")
    use = uses[0]
    if use.get("name") != name:
        return Unreadable(f"You called {use.get('name')!r}; call {name!r}.", use.get("id"))
    data = use.get("input")
    if not isinstance(data, dict):
        return Unreadable(
            "The tool input was not a JSON object. Call the tool again with a JSON object.",
            use.get("id"),
            data,
        )
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"- at {'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in errors[:MAX_ERRORS_REPORTED]
        ]
        return Unreadable(
            "The tool input did not match the schema:\n"
            + "\n".join(lines)
            + "\nCall the tool again with a corrected input.",
            use.get("id"),
            data,
        )
    return data


def read_text_output(content: list[dict[str, Any]]) -> str | Unreadable:
    """The text of a free-text reply; an empty reply is unreadable."""
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text").strip()
    if not text:
        return Unreadable("Your reply was empty. Answer in text.")
    return text


def retry_messages(
    messages: list[dict[str, Any]], content: list[dict[str, Any]], problem: Unreadable
) -> list[dict[str, Any]]:
    """The conversation of the second attempt: the model's reply and what was wrong with it."""
    if problem.tool_use_id is not None:
        assistant = [_echo(b) for b in content if b.get("type") in ("text", "tool_use")]
        feedback: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": problem.tool_use_id,
                "is_error": True,
                "content": problem.problem,
            }
        ]
    else:
        assistant = [b for b in content if b.get("type") == "text"] or [
            {"type": "text", "text": "(no answer)"}
        ]
        feedback = [{"type": "text", "text": problem.problem}]
    return [
        *messages,
        {"role": "assistant", "content": assistant},
        {"role": "user", "content": feedback},
    ]


def _echo(block: dict[str, Any]) -> dict[str, Any]:
    """A reply block as it is sent back: only the fields the API accepts, an object as input."""
    if block.get("type") == "text":
        return {"type": "text", "text": block.get("text") or "(empty)"}
    data = block.get("input")
    return {
        "type": "tool_use",
        "id": block.get("id"),
        "name": block.get("name"),
        "input": data if isinstance(data, dict) else {},
    }
