"""uvicorn's HTTP/1.1 protocols with the edge's header limit and `{code, message}` refusals.

Before the app sees a request, uvicorn parses its request line and headers. Left to itself it
refuses an oversized header block (a long bearer token) or a malformed request with a plain-text
400 and closes the socket at once, while the client is still sending: the client gets a
connection reset instead of an answer. h11 only measures a header block that arrives in pieces
(whether a 100 kB token was refused depended on how the kernel split the bytes), and httptools
measures none. Both edge protocols answer the same way:

- a request line and headers over `HTTP_MAX_HEADER_BYTES` are refused with 413
  `payload_too_large`, however they arrive (measured incomplete and complete);
- a request the parser cannot parse is 400 `invalid_request`;
- either answer is JSON with `Connection: close`; the socket is then half-closed and what the
  client still sends is read and dropped (at most `LINGER_BYTES`, `LINGER_S` seconds) before it is
  closed, so the answer is read rather than lost to a reset (nginx's "lingering close").

`EdgeHttpToolsProtocol` (uvicorn's httptools protocol: llhttp, in C) is what `uvicorn_server`
(quiz_servicekit.app) serves with: about a third of the CPU of h11 per request.
`EdgeH11Protocol` (pure Python) stays for where httptools has no wheel (without the deadlines
below).

Slow and odd clients (issue 29, item 7), on `EdgeHttpToolsProtocol`, each figure a setting
(`EdgeConfig`, from `ServiceSettings`; defaults in docs/operations.md):

- the request line and headers must be complete within `HTTP_HEAD_TIMEOUT_S` (10 s) of the
  connection opening, or of the first byte of the next request on a kept-alive connection;
  otherwise 408 `timeout` and the connection is closed (a client that connects and sends nothing
  is closed too): half-open sockets cannot pile up (slowloris);
- a request body may pause at most `HTTP_BODY_IDLE_TIMEOUT_S` (10 s) between two reads; then
  the connection is closed and the app sees the client gone;
- an idle kept-alive connection is closed after `HTTP_KEEP_ALIVE_S` (5 s; uvicorn's own timer);
- past `HTTP_MAX_CONNECTIONS` open connections, a new one is answered 503 `unavailable` and
  closed at once;
- a request line that is not `METHOD target HTTP/1.0|1.1` (HTTP/0.9's `GET /`, which llhttp
  would hold waiting for headers that never come, or any other version) is 400
  `invalid_request`.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.limits import HTTP_MAX_HEADER_BYTES

# How long and how much of a refused request is still read after the answer, so closing the
# socket never discards unread bytes (which makes the kernel reset the connection).
LINGER_S = 5.0
LINGER_BYTES = 16 * 1024 * 1024

# The edge's defaults (ServiceSettings reads each from the environment).
HEAD_TIMEOUT_S = 10.0
BODY_IDLE_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 4096
# HTTP/1.0 and 1.1 only: `GET /` alone (HTTP/0.9) or `HTTP/2.0` in a request line is refused.
REQUEST_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+ \S+ HTTP/1\.[01]\r?")
# A request line longer than this is left to the parser (and to the header limit).
MAX_CHECKED_LINE = 8192


class EdgeConfig(Config):
    """uvicorn's Config with the edge's deadlines and connection cap (seconds; a count)."""

    def __init__(
        self,
        app: Any,
        *,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        body_idle_timeout_s: float = BODY_IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.head_timeout_s = head_timeout_s
        self.body_idle_timeout_s = body_idle_timeout_s
        self.max_connections = max_connections


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


class _Lingering:
    """The lingering close after a refusal: half-close, drop what the client still sends."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _lingering = False
    _lingered = 0

    def _linger(self) -> None:
        """Half-close, drop what the client still sends, close when it does or after LINGER_S."""
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def _drop(self, size: int) -> None:
        """Read and dropped: the answer is already sent."""
        self._lingered += size
        if self._lingered > LINGER_BYTES:
            self.transport.close()


class EdgeH11Protocol(_Lingering, H11Protocol):
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

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            self._drop(len(data))
            return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this when h11 refuses the request; we answer in the edge's words."""
        refusal = self._measured.refusal
        error = _refusal(refusal is not None and refusal.error_status_hint == 431)
        self.logger.warning("refused before routing: %s", error.message)
        status, headers, body = _refusal_parts(error)
        for event in (
            h11.Response(status_code=status, headers=headers),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self._linger()


def _refusal(too_large: bool) -> ContractError:
    """What a request refused before routing is answered: 413 for its size, else 400."""
    if too_large:
        return ContractError(
            ErrorCode.payload_too_large,
            f"request headers over {HTTP_MAX_HEADER_BYTES} bytes (a bearer token is at most "
            "a fraction of that)",
        )
    return ContractError(ErrorCode.invalid_request, "malformed HTTP request")


def _refusal_parts(error: ContractError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and JSON body of a refusal; the connection closes after it."""
    body = json.dumps(
        error.to_body().model_dump(mode="json", exclude_none=True), separators=(",", ":")
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    return error.status, headers, body


class _HeadersTooLarge(Exception):
    """Raised from a parser callback: httptools stops with `HttpParserCallbackError`, a parse
    error, which uvicorn answers through `send_400_response`."""


class EdgeHttpToolsProtocol(_Lingering, HttpToolsProtocol):
    """uvicorn's httptools protocol with the edge's header limit; refusals `{code, message}`.

    httptools (llhttp) buffers a header it has not seen the end of, whatever its size. The block
    is measured twice: what the parser hands over (request target, each header) as it completes,
    and, while the block is still incomplete, the bytes received for it, so a block without an
    end is refused at `HTTP_MAX_HEADER_BYTES` (plus at most one read) rather than held.
    """

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._in_head = False
        self._head_bytes = 0  # the complete parts of this request's line and headers
        self._head_received = 0  # bytes received while this request's block was incomplete
        self._too_large = False
        self._refusal_kind = ""  # why send_400_response answers: "", "version"
        self._head_timeout_s = getattr(config, "head_timeout_s", HEAD_TIMEOUT_S)
        self._body_idle_timeout_s = getattr(config, "body_idle_timeout_s", BODY_IDLE_TIMEOUT_S)
        self._max_connections = getattr(config, "max_connections", MAX_CONNECTIONS)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        # The start of a request line not yet ended, when a read begins a request (None: the
        # parser is inside a request, or a pipelined one began mid-read).
        self._line: bytes | None = b""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._max_connections:
            self._refuse_now(
                503,
                ContractError(
                    ErrorCode.unavailable,
                    f"over {self._max_connections} open connections: try again shortly",
                    retry_after_s=1,
                ),
            )
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self._head_timeout_s, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head waits behind the answer the app is still writing: the deadline
            # is the client's, so it counts afresh once that answer is out (on_response_complete).
            return
        self._refuse_now(
            408,
            ContractError(
                ErrorCode.timeout,
                f"the request line and headers took over {self._head_timeout_s:g} s",
            ),
        )

    def _arm_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self.loop.call_later(self._body_idle_timeout_s, self._body_timed_out)

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:
            # The app is not reading the body yet (flow control paused the socket): the wait
            # is ours, not the client's.
            self._arm_body_timer()
            return
        if not self.transport.is_closing():
            self.logger.warning(
                "request body idle over %g s: connection closed", self._body_idle_timeout_s
            )
            self.transport.close()

    def _refuse_now(self, status: int, error: ContractError) -> None:
        """Answer `error` with `status` and close at once (no lingering: the client is slow or
        one too many, and what it may still send is not worth the wait)."""
        self.logger.warning("refused before routing: %s", error.message)
        _, headers, body = _refusal_parts(error)
        self._cancel_timers()
        default_headers = self.server_state.default_headers
        self.transport.write(_raw_response(status, default_headers, headers, body))
        self.transport.close()

    def _check_request_line(self, data: bytes) -> bool:
        """False (and a 400 sent) when a read beginning a request holds a request line that is
        not HTTP/1.0 or 1.1; short reads are kept until the line ends."""
        if self._line is None:
            return True
        pending = (self._line + data).lstrip(b"\r\n")  # empty lines before a request are allowed
        end = pending.find(b"\n")
        if end < 0:
            self._line = pending if len(pending) <= MAX_CHECKED_LINE else None
            return True
        self._line = None
        if REQUEST_LINE.fullmatch(pending[:end]):
            return True
        self._refusal_kind = "version"
        self.send_400_response("not an HTTP/1.x request line")
        return False

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            self._drop(len(data))
            return
        if not self._check_request_line(data):
            return
        if self._head_timer is None and not self._in_head and self._body_timer is None:
            # The first byte of the next request on a kept-alive connection.
            self._arm_head_timer()
        elif self._body_timer is not None:
            self._arm_body_timer()
        # A read that began inside an incomplete block is all head bytes until the block ends;
        # one that began a request is measured by the callbacks (its tail is at most one read).
        counted = self._in_head
        super().data_received(data)
        if self._lingering or not (counted and self._in_head):
            return
        self._head_received += len(data)
        if self._head_received > HTTP_MAX_HEADER_BYTES:
            self._too_large = True
            self.send_400_response("headers too large")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A request that began in the middle of a read (pipelined) is the parser's to judge.
        self._line = None
        self._arm_head_timer()
        self._in_head = True
        # The request line's fixed part (" HTTP/1.1\r\n") and the blank line ending the block.
        self._head_bytes = 13
        self._head_received = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._count(len(self.parser.get_method()))
        if self.parser.get_http_version() not in ("1.0", "1.1"):
            self._refusal_kind = "version"
            raise _HeadersTooLarge  # a callback error: answered through send_400_response
        # A body may follow: it may pause between reads, not for ever.
        self._arm_body_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # The next read begins the next request (unless one is already pipelined).
        if not self.pipeline and not self._in_head and self._body_timer is None:
            self._line = b""
        if self._in_head:
            # A pipelined head still incomplete: its whole deadline from now (see above).
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            self._arm_head_timer()
        super().on_response_complete()

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > HTTP_MAX_HEADER_BYTES:
            self._too_large = True
            raise _HeadersTooLarge

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this when httptools refuses the request (a callback of ours included)."""
        if self._refusal_kind == "version":
            error = ContractError(ErrorCode.invalid_request, "HTTP/1.0 or HTTP/1.1 requests only")
        else:
            error = _refusal(self._too_large)
        self.logger.warning("refused before routing: %s", error.message)
        status, headers, body = _refusal_parts(error)
        self._cancel_timers()
        default_headers = self.server_state.default_headers
        self.transport.write(_raw_response(status, default_headers, headers, body))
        self._linger()


def _raw_response(
    status: int,
    default_headers: list[tuple[bytes, bytes]],
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> bytes:
    """An HTTP/1.1 response as bytes; no reason phrase, as h11 sends it (RFC 9112 allows it)."""
    content = [b"HTTP/1.1 %d \r\n" % status]
    for name, value in [*default_headers, *headers]:
        content += [name, b": ", value, b"\r\n"]
    content += [b"\r\n", body]
    return b"".join(content)
