"""HTTP edge: request ids and a catch-all, body limits, RED metrics and spans, `{code, message}`.

Middleware order, outermost first: `CatchAllMiddleware` (request id; any unexpected exception
becomes a 500 `internal` JSON body), `TelemetryMiddleware` (SERVER span, RED metrics),
`BodyGuardMiddleware` (413 over the route's maximum before the body is read whole, 400 for
hostile JSON), then the routes, whose dependencies check the token.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.edge import guard_json, internal_error, invalid_request, new_request_id
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.telemetry import extract_context

log = logging.getLogger(__name__)

# Probes and scrapes are not traffic: counting them would drown the routes' RED signals.
_UNTRACED = {"/healthz", "/readyz", "/metrics"}


class TelemetryMiddleware:
    """Pure ASGI middleware: one SERVER span (remote parent from traceparent) and RED per route."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, service: str) -> None:
        self.app = app
        self.metrics = metrics
        self.tracer = trace.get_tracer(f"quiz.{service}.http")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _UNTRACED:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        method = scope["method"]
        with self.tracer.start_as_current_span(
            f"{method} {scope['path']}",
            context=extract_context(headers),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope["path"]},
        ) as span:
            try:
                await self.app(scope, receive, send_wrapper)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None) or "unmatched"
                span.update_name(f"{method} {template}")
                span.set_attribute("http.route", template)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                self.metrics.http_requests.labels(template, method, str(status)).inc()
                self.metrics.http_duration.labels(template, method).observe(
                    time.perf_counter() - started
                )


async def _send_error(send: Send, error: ContractError, request_id: str | None = None) -> None:
    """A whole `{code, message}` response, sent from middleware (no Response object needed)."""
    body = json.dumps(error.to_body().model_dump(mode="json", exclude_none=True)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if request_id:
        headers.append((b"x-request-id", request_id.encode()))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class CatchAllMiddleware:
    """A request id for every request; an unexpected exception is logged under it, answered 500.

    The id is the caller's `X-Request-Id` when sane, else fresh; it is echoed in the response
    header. The caller of a failed request sees `internal` and the id, never the exception.
    """

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"")
        request_id = new_request_id(offered.decode("latin-1") or None)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception(
                "%s: %s %s failed [request_id=%s]",
                self.service,
                scope.get("method"),
                scope.get("path"),
                request_id,
            )
            if not started:
                await _send_error(send, internal_error(request_id), request_id)


class BodyGuardMiddleware:
    """Refuse a body over its route's maximum (413) before reading it whole; vet JSON (400).

    The maximum is the route's own FastAPI `max_body_size` (`@router.post(..., max_body_size=N)`)
    or the service's HTTP_MAX_BODY_BYTES. A declared Content-Length over it is refused unread; a
    chunked body is counted as it arrives and refused at the first byte over. A JSON body under
    the maximum is checked by `guard_json` (depth, lone surrogates), then replayed unchanged.
    All of it happens before routing, so before any dependency (the token check) runs.
    """

    def __init__(self, app: ASGIApp, routes: Sequence[APIRoute], default_max_bytes: int) -> None:
        self.app = app
        self.routes = routes
        self.default_max_bytes = default_max_bytes

    def _limit(self, scope: Scope) -> int:
        for route in self.routes:
            if route.matches(scope)[0] is Match.FULL:
                # Telemetry labels the request by this template even when we answer it here.
                scope["route"] = route
                limit = route.max_body_size
                return self.default_max_bytes if limit is None else limit
        return self.default_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        too_large = ContractError(
            ErrorCode.payload_too_large, f"request body over {limit} bytes, this route's maximum"
        )
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_error(send, too_large)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send_error(send, too_large)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        content_type = headers.get(b"content-type", b"application/json")
        content_type = content_type.split(b";")[0].strip().lower()
        if body and (content_type == b"application/json" or content_type.endswith(b"+json")):
            try:
                guard_json(body)
            except ContractError as e:
                await _send_error(send, e)
                return
        await self.app(scope, _replay([body], None, receive), send)


def _replay(chunks: list[bytes], pending: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the buffered body once, then whatever the client sends next."""
    queue: list[Message] = [{"type": "http.request", "body": c, "more_body": False} for c in chunks]
    if pending is not None:
        queue.append(pending)

    async def replay() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replay


def error_response(error: ContractError) -> JSONResponse:
    """The `{code, message}` body of a contract error, with its HTTP status."""
    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(error.retry_after_s)))
    return JSONResponse(
        error.to_body().model_dump(mode="json", exclude_none=True),
        status_code=error.status,
        headers=headers,
    )


def install_error_handlers(app: FastAPI) -> None:
    """Every error leaves as `{code, message}`: contract errors, validation, unknown routes."""

    async def on_contract(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ContractError)
        return error_response(exc)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(invalid_request(exc.errors()))

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {
            401: ErrorCode.unauthorized,
            404: ErrorCode.not_found,
            405: ErrorCode.invalid_request,
            413: ErrorCode.payload_too_large,
        }.get(
            exc.status_code,
            ErrorCode.internal if exc.status_code >= 500 else ErrorCode.invalid_request,
        )
        body = {"code": code.value, "message": str(exc.detail)}
        return JSONResponse(body, status_code=exc.status_code)

    app.add_exception_handler(ContractError, on_contract)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


ReadyCheck = Callable[[], Awaitable[bool]]
