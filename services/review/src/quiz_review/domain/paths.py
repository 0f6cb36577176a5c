"""A finding's path: `explanation`, or a dot path into a question's config (ADR-060 §2).

Rules (HQ packages/domain/src/review.ts parsePath/valueAt/withValueAt, FACTS E):
- there is no per-type allow-list: any path that names a value of the config is a path;
- segments are split on "."; an ASCII-digit segment is a list index from 0;
- an empty segment, `__proto__`, `constructor` or `prototype` makes the whole string no path;
- a path names a value when every step exists: a key of an object, an index of a list. A value
  may be anything JSON holds, `null` included; a missing step is `MISSING`, not `None`.

Where JavaScript would differ we keep to JSON: a key is only an own key of an object (no
`length` of a list, no `toString` of every object) and a string has no children. A digit
segment on an object is the key its number spells ("01" → "1"), as in the platform.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

EXPLANATION_PATH: Final = "explanation"

# Words that would reach an object's prototype in the platform's JavaScript: never a path there,
# so never one here either (a finding the platform drops must be dropped here too).
_FORBIDDEN_SEGMENTS: Final = frozenset({"__proto__", "constructor", "prototype"})
# ASCII only: str.isdigit() would take "²" or "١" for an index.
_INDEX = re.compile(r"[0-9]+")


class _Missing:
    """The absence of a value (JSON null is a value)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()

Segment = str | int


def parse_path(path: str) -> tuple[Segment, ...] | None:
    """`choices.2.text` → ("choices", 2, "text"); None for a string that is no path."""
    parts = path.split(".")
    if any(part == "" or part in _FORBIDDEN_SEGMENTS for part in parts):
        return None
    return tuple(int(part) if _INDEX.fullmatch(part) else part for part in parts)


def value_at(root: Any, path: Sequence[Segment]) -> Any:
    """The value at `path` in a JSON value, or MISSING when a step does not exist."""
    node = root
    for segment in path:
        node = _child(node, segment)
        if node is MISSING:
            return MISSING
    return node


def with_value_at(root: Any, path: Sequence[Segment], value: Any) -> Any:
    """A copy of `root` with the value at `path` replaced; MISSING when the path does not exist.

    Only the containers along the path are copied; everything else is shared.
    """
    if not path:
        return value
    head, rest = path[0], path[1:]
    child = _child(root, head)
    if child is MISSING:
        return MISSING
    replaced = with_value_at(child, rest, value)
    if replaced is MISSING:
        return MISSING
    if isinstance(root, list):
        copy_list = list(root)
        copy_list[head] = replaced  # type: ignore[index]  # _child found an int index
        return copy_list
    copy_dict = dict(root)
    copy_dict[head] = replaced
    return copy_dict


def field_value(config: Any, explanation: str, path: str) -> Any:
    """What a finding's path names: the version's explanation, or a value of its config.

    `explanation` always means the explanation, even when the config has a field of that name.
    """
    if path == EXPLANATION_PATH:
        return explanation
    segments = parse_path(path)
    return MISSING if segments is None else value_at(config, segments)


def _child(node: Any, segment: Segment) -> Any:
    if isinstance(node, Mapping):
        key = str(segment)
        return node[key] if key in node else MISSING
    if isinstance(node, list) and isinstance(segment, int):
        return node[segment] if segment < len(node) else MISSING
    return MISSING
