"""What every edge checks before decoding, the same way for HTTP routes and NATS endpoints.

- `guard_json`: a body nested deeper than `MAX_JSON_DEPTH`, a lone surrogate (`"\\ud800"`) or
  malformed JSON is `invalid_request` before any model sees it (a lone surrogate would
  otherwise fail later, at the first UTF-8 encode, as a 500).
- `invalid_request`: the one mapping of pydantic validation errors to `{code, message}`.
- `new_request_id`: the id an unexpected failure is logged under and answered with.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.limits import MAX_JSON_DEPTH

# A JSON string, escapes included ("unrolled loop": no alternation per character).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(rb"[\[\]{}]")
_OPENERS = frozenset((b"[", b"{"))
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def json_depth(data: bytes) -> int:
    """How deep arrays and objects nest in `data` (0 for a scalar); brackets in strings skipped."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub(b"", data)):
        if bracket in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def guard_json(data: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise `invalid_request` unless `data` is JSON, nested at most `max_depth`, valid UTF-16.

    The depth is counted before parsing, so no parser recurses into a hostile body; the parse
    (pydantic-core's, in Rust) refuses lone surrogates and malformed text.
    """
    depth = json_depth(data)
    if depth > max_depth:
        raise ContractError(
            ErrorCode.invalid_request, f"body: JSON nested {depth} deep; at most {max_depth}"
        )
    try:
        pydantic_core.from_json(data)
    except ValueError as e:
        # jiter's messages say what and where ("lone leading surrogate … at line 1 column 7"),
        # never the input itself.
        raise ContractError(ErrorCode.invalid_request, f"body: invalid JSON: {e}") from None


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> ContractError:
    """The `invalid_request` of a list of pydantic errors: where the first one is, and what."""
    first: Mapping[str, Any] = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return ContractError(ErrorCode.invalid_request, f"{where}: {first.get('msg', 'invalid')}")


def new_request_id(offered: str | None = None) -> str:
    """The caller's `X-Request-Id` when it is a sane token, else a fresh one."""
    if offered and _REQUEST_ID.match(offered):
        return offered
    return uuid.uuid4().hex


def internal_error(request_id: str) -> ContractError:
    """What a caller sees of an unexpected failure: nothing of it but the id to find it by."""
    return ContractError(
        ErrorCode.internal,
        f"internal error; see the service's log for request {request_id}",
        details={"request_id": request_id},
    )
