"""uvicorn's h11 protocol with the edge's header limit and `{code, message}` refusals.

Before the app sees a request, uvicorn parses its request line and headers with h11. Left to
itself it refuses an oversized header block (a long bearer token) or a malformed request with a
plain-text 400 and closes the socket at once, while the client is still sending: the client gets
a connection reset instead of an answer. And h11 only measures a header block that arrives in
pieces, so whether a 100 kB token is refused depended on how the kernel split the bytes.
`EdgeH11Protocol` fixes all three:

- a request line and headers over `HTTP_MAX_HEADER_BYTES` are refused with 413
  `payload_too_large`, however they arrive (measured incomplete by h11, complete by us);
- a request h11 cannot parse is 400 `invalid_request`;
- either answer is JSON with `Connection: close`; the socket is then half-closed and what the
  client still sends is read and dropped (at most `LINGER_BYTES`, `LINGER_S` seconds) before it is
  closed, so the answer is read rather than lost to a reset (nginx's "lingering close").

`uvicorn_server` (quiz_servicekit.app) uses it, explicitly, so installing httptools never swaps in
a parser with other limits.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.limits import HTTP_MAX_HEADER_BYTES

# How long and how much of a refused request is still read after the answer, so closing the
# socket never discards unread bytes (which makes the kernel reset the connection).
LINGER_S = 5.0
LINGER_BYTES = 16 * 1024 * 1024


def header_bytes(request: h11.Request) -> int:
    """The size of a request's line and headers as sent, CRLFs included (whitespace around values
    aside, which h11 strips)."""
    line = len(request.method) + len(request.target) + len(b" HTTP/1.1\r\n") + 1
    fields = sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items())
    return line + fields + 2


class _MeasuredConnection(h11.Connection):
    """h11's server connection that remembers why it refused, and measures complete blocks."""

    def __init__(self, max_header_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_header_bytes)
        self.max_header_bytes = max_header_bytes
        self.refusal: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as e:
            self.refusal = e
            raise
        if isinstance(event, h11.Request) and header_bytes(event) > self.max_header_bytes:
            # A block that arrived in one read never looked incomplete to h11: same limit.
            self.refusal = h11.RemoteProtocolError("headers too large", error_status_hint=431)
            raise self.refusal
        return event


class EdgeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; refusals before the app are `{code, message}`, read to the end."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._measured = _MeasuredConnection(HTTP_MAX_HEADER_BYTES)
        self.conn = self._measured
        self._lingering = False
        self._lingered = 0

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            # Read and dropped: the answer is already sent.
            self._lingered += len(data)
            if self._lingered > LINGER_BYTES:
                self.transport.close()
            return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this when h11 refuses the request; we answer in the edge's words."""
        refusal = self._measured.refusal
        if refusal is not None and refusal.error_status_hint == 431:
            error = ContractError(
                ErrorCode.payload_too_large,
                f"request headers over {HTTP_MAX_HEADER_BYTES} bytes (a bearer token is at most "
                "a fraction of that)",
            )
        else:
            error = ContractError(ErrorCode.invalid_request, "malformed HTTP request")
        self.logger.warning("refused before routing: %s", error.message)
        body = json.dumps(error.to_body().model_dump(mode="json", exclude_none=True)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=error.status, headers=headers),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self._linger()

    def _linger(self) -> None:
        """Half-close, drop what the client still sends, close when it does or after LINGER_S."""
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)
