"""Edge limits every service applies before decoding a request (HTTP body, NATS payload).

A route may lower or raise its own body maximum (`quiz_servicekit.http.max_body_bytes`); the
per-type limits of question drafts live with the question types.
"""

from __future__ import annotations

# A request body larger than this is refused with 413 `payload_too_large` before it is read
# whole (and before its token is checked). 1 MiB: what a NATS hop carries by default, so a body
# that passes the HTTP edge can still be forwarded over the bus.
HTTP_MAX_BODY_BYTES = 1_048_576

# JSON nested deeper than this is refused as `invalid_request` at every edge. Rich-text documents
# (nested lists in lists) stay far below; a 659-byte body nested 300 deep does not.
MAX_JSON_DEPTH = 64

# A request line and headers larger than this are refused with 413 `payload_too_large` before the
# request is routed (quiz_servicekit.http_protocol), in JSON, and read to the end so the client
# gets the answer rather than a reset. 64 KiB: browsers' cookies and a bearer token fit far below.
HTTP_MAX_HEADER_BYTES = 65_536

# A bearer token longer than this is refused with 401 `unauthorized` before its signature is
# checked (quiz_servicekit.auth): a platform token carries one person's grants, a few hundred
# bytes; 16 KiB is also what h11 and most proxies hold for one header by default.
MAX_TOKEN_BYTES = 16_384
