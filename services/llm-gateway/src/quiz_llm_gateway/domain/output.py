"""Structured output: the forced tool, schema validation and the message that asks once more."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import NoSuchResource

MAX_ERRORS_REPORTED = 5
# Keywords that name another resource or open a new resolution scope: a caller's schema is
# data, so it may only point inside itself (`#…`), never at a URL or a file.
REF_KEYWORDS = ("$ref", "$dynamicRef")
SCOPE_KEYWORDS = ("$id", "$anchor", "$dynamicAnchor")
# Caller patterns run on RE2 (linear time in the input: no catastrophic backtracking), with
# a bounded program size; what RE2 cannot run (backreferences, lookaround) is refused.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20


class InvalidSchema(ValueError):
    """The caller's JSON Schema is not a valid object schema: invalid_request."""


def _refuse_retrieval(uri: str) -> Any:
    """The validator's registry never fetches: not the network, not the disk."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


# Empty but for what the validator itself carries (the metaschemas); retrieves nothing.
NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


@lru_cache(maxsize=1024)
def linear_pattern(pattern: str) -> Any:
    """The RE2 program of a schema pattern; InvalidSchema when RE2 cannot run it."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except Exception as exc:
        raise InvalidSchema(
            f"pattern {pattern[:80]!r} is not supported: patterns run on a linear-time engine "
            "(RE2), without backreferences or lookaround"
        ) from exc


def _pattern(validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    """The `pattern` keyword on RE2 instead of Python's backtracking `re`."""
    if validator.is_type(instance, "string") and linear_pattern(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# Draft 2020-12 with `pattern` on RE2; `patternProperties` is refused at check time (jsonschema
# also runs its patterns through `re` inside additionalProperties/unevaluatedProperties).
LinearValidator = validators.extend(Draft202012Validator, {"pattern": _pattern})


def _pointer(root: Any, ref: str) -> Any:
    """The node a local `#/a/b` JSON pointer names; LookupError when it names nothing."""
    node = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            raise LookupError(ref)
    return node


def check_references(schema: dict[str, Any]) -> None:
    """Refuse any `$ref` that is not a resolvable local pointer, new scopes, and patterns RE2
    cannot run; compiles every pattern once (at request time, before any provider call)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in REF_KEYWORDS and isinstance(value, str):
                if not value.startswith("#/") and value != "#":
                    raise InvalidSchema(
                        f"{key} {value[:80]!r} is not allowed: only local references (#/…) "
                        "to the schema itself"
                    )
                try:
                    _pointer(schema, value)
                except (LookupError, ValueError, TypeError) as exc:
                    raise InvalidSchema(
                        f"{key} {value[:80]!r} names nothing in the schema"
                    ) from exc
            elif key in SCOPE_KEYWORDS and isinstance(value, str):
                raise InvalidSchema(f"{key} is not allowed in an output schema")
            elif key == "patternProperties" and isinstance(value, dict):
                raise InvalidSchema("patternProperties is not supported in an output schema")
            elif key == "pattern" and isinstance(value, str):
                linear_pattern(value)
            stack.append(value)


def check_schema(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for the schema, refusing non-object or malformed schemas, non-local
    references and patterns a linear-time engine cannot run."""
    if schema.get("type") != "object":
        raise InvalidSchema("output schema must have type 'object' (it becomes a tool input)")
    check_references(schema)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidSchema(f"output schema is not valid JSON Schema: {exc.message}") from exc
    return LinearValidator(schema, registry=NO_RETRIEVAL)


VALIDATORS_KEPT = 256
_validators: dict[str, Draft202012Validator] = {}


def cached_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """check_schema, remembered per schema: meta-validation costs milliseconds.

    Keyed by the schema's `repr`, unambiguous for JSON values (the same schema with its keys in
    another order is one more entry, never a wrong one) and ~2× cheaper than the sorted
    `json.dumps` it replaces (2.5 % of the gateway's CPU per call, issue 24). A refused schema
    is not kept; past VALIDATORS_KEPT entries the oldest goes.
    """
    key = repr(schema)
    found = _validators.get(key)
    if found is None:
        # A private copy: the validator outlives the request whose dict it was given.
        found = check_schema(copy.deepcopy(schema))
        if len(_validators) >= VALIDATORS_KEPT:
            del _validators[next(iter(_validators))]
        _validators[key] = found
    return found


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


def read_json_output(
    content: list[dict[str, Any]], validator: Draft202012Validator
) -> dict[str, Any] | Unreadable:
    """The validated JSON object of a json_schema reply's text (`output_config.format`,
    `domain.structured`), or what was wrong with it, worded as `read_tool_output` words it."""
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text").strip()
    if not text:
        return Unreadable("Your reply was empty. Answer with the JSON object.")
    try:
        data = json.loads(text)
    except ValueError as exc:
        return Unreadable(f"Your reply was not valid JSON ({exc}). Answer with the JSON object.")
    if not isinstance(data, dict):
        return Unreadable("Your reply was not a JSON object. Answer with a JSON object.")
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"- at {'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in errors[:MAX_ERRORS_REPORTED]
        ]
        return Unreadable(
            "The JSON object did not match the schema:\n"
            + "\n".join(lines)
            + "\nAnswer again with a corrected JSON object."
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
        # Echoed as `_echo` does (type and text only): the same turn whichever path read the
        # reply (the SDK's blocks carry `citations: null`), and never an empty text block.
        assistant = [_echo(b) for b in content if b.get("type") == "text"] or [
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
