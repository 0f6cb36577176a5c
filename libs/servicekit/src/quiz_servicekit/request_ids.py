"""Request ids of model calls, derived from the work they serve (issue 20: never paid twice).

The llm-gateway answers a `request_id` it has seen from its stored reply (or joins the call in
hand), so an id that names the WORK — not a fresh uuid per send — makes every redelivery and
every retry of that work free. Each service names its own work (review: the request and the
version; poll: the evaluation, the pass and the batch); a person's HTTP request is named here:

- with an `Idempotency-Key` header (the IETF draft's name), by the key and who sent it: the
  platform sends a new key per click and the same key when it retries that click;
- without one, by who sent it, the route (method and path) and the body: a retry of the same
  request is the same request. The same request sent again on purpose within the gateway's
  `idempotency_ttl_s` (10 min) is answered with the same reply, free; a caller that wants a
  fresh answer to an identical request sends a new Idempotency-Key.

Ids are at most `MAX_REQUEST_ID` characters (the contract's bound): a longer one keeps its
prefix and ends in the SHA-256 of the whole.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

# The header a caller may send to name its request (draft-ietf-httpapi-idempotency-key-header).
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
# CompleteRequest.request_id's max_length.
MAX_REQUEST_ID = 200
# Hex digits of SHA-256 kept in an id (128 bits: no two requests share one by chance).
DIGEST_CHARS = 32


def digest(*parts: object) -> str:
    """The first DIGEST_CHARS hex digits of SHA-256 over `parts` as canonical JSON.

    A pydantic model counts as its JSON dump (`mode="json"`), so equal models digest equally.
    """
    plain = [p.model_dump(mode="json") if isinstance(p, BaseModel) else p for p in parts]
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def bounded_id(*parts: str) -> str:
    """`parts` joined by `:`; over MAX_REQUEST_ID characters, the first part, `:`, and the
    digest of all the parts (still one id per distinct work)."""
    whole = ":".join(parts)
    if len(whole) <= MAX_REQUEST_ID:
        return whole
    head = parts[0][: MAX_REQUEST_ID - DIGEST_CHARS - 1]
    return f"{head}:{digest(*parts)}"


def caller_key(
    *,
    principal: str,
    method: str,
    path: str,
    body: BaseModel | None,
    idempotency_key: str | None,
) -> str:
    """What names a person's HTTP request (see the module docstring), for a service to put in
    its call's id beside what else fixes the call (`bounded_id("generate", type, key)`).

    `key:<digest(principal, key)>` with an Idempotency-Key, else
    `req:<digest(principal, METHOD, path, body)>`. Pure: same inputs, same key.
    """
    if idempotency_key:
        return f"key:{digest(principal, idempotency_key)}"
    return f"req:{digest(principal, method.upper(), path, body)}"
