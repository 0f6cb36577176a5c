"""Base model of every wire payload: unknown fields ignored, numbers and booleans never from text.

The platform's schemas (zod) neither coerce `"1"` to 1 nor `"yes"` or 1 to true, so neither do
ours: in a `WireModel`, every `int`, `float` and `bool` — in a field, a list, a union, a nested
model — takes a JSON number or boolean only. An integral number written `3.0` is still 3, as in
JavaScript; dict keys (always strings in JSON) are left as they are read.

Only the wire is strict: settings (pydantic-settings) and query parameters are text by nature
and are not `WireModel`s.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

# Marks an int schema already wrapped, so a model embedded in another is not wrapped twice.
_MARK = "quiz_contracts.no_text_numbers"
# Parts of a core schema that do not validate input (keys: JSON object keys are text).
_SKIPPED = frozenset({"keys_schema", "serialization", "metadata", "cls", "ref"})


def _no_text_integer(value: Any) -> Any:
    """An int is a JSON number (`3`, `3.0`), never text nor a boolean."""
    if isinstance(value, (str, bytes, bytearray, bool)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def strict_scalars(schema: CoreSchema) -> CoreSchema:
    """`schema` with every bool and float strict, every int refusing text and booleans.

    Mutates in place and returns it. Integers keep pydantic's lax number handling (`3.0` is 3,
    `3.5` refused) behind a check that refuses strings, bytes and booleans; bools and floats
    take pydantic's strict mode (a float accepts an integer, as JSON does).
    """
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind in ("bool", "float"):
            node["strict"] = True
        elif kind == "int":
            inner = dict(node)
            node.clear()
            node.update(
                core_schema.no_info_before_validator_function(
                    _no_text_integer, inner, metadata={_MARK: True}
                )
            )
            continue
        elif isinstance(node.get("metadata"), dict) and node["metadata"].get(_MARK):
            continue
        stack.extend(v for k, v in node.items() if k not in _SKIPPED)
    return schema


class WireModel(BaseModel):
    """A versioned wire payload. Unknown fields are ignored so v1 can grow additively."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[BaseModel], handler: GetCoreSchemaHandler, /
    ) -> CoreSchema:
        # Built from the model's own schema, so every subclass and every field is covered
        # without an annotation of its own; see the module docstring.
        return strict_scalars(handler(source))
