"""HTTP edge: request ids and a catch-all, body limits, RED metrics and spans, `{code, message}`.

One middleware, `EdgeMiddleware`, outermost: request id and catch-all (any unexpected exception
becomes a 500 `internal` JSON body), SERVER span and RED metrics, the body limit (413 over the
route's maximum before the body is read whole) and the JSON guard (400 for hostile JSON); then
the app's exception handlers and the routes, whose dependencies check the token (`EdgeApp`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.edge import guard_json, internal_error, invalid_request, new_request_id
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.telemetry import extract_context

log = logging.getLogger(__name__)

# Probes and scrapes are not traffic: counting them would drown the routes' RED signals.
_UNTRACED = {"/healthz", "/readyz", "/metrics"}


# A bounded memo of which route a (method, path) is and its body maximum: one poll is one path
# taking thousands of answers, and a scan of every route per request is what it saves.
_ROUTE_MEMO_MAX = 4096


class EdgeMiddleware:
    """The edge in one pure ASGI middleware, in this order of effects, outermost first:

    1. a request id for every request (the caller's `X-Request-Id` when sane, else fresh; echoed
       in the response header) and a catch-all: an unexpected exception is logged under the id
       and answered 500 `internal` carrying it, never the exception itself;
    2. one SERVER span per request (remote parent from the trace context headers, W3C
       `traceparent` by default) and the RED metrics per route template; probes and scrapes
       (`/healthz`, `/readyz`, `/metrics`) are neither traced nor counted;
    3. for a request with a body (not GET/HEAD/OPTIONS) the body limit: the route's own FastAPI
       `max_body_size` (`@router.post(..., max_body_size=N)`) or the service's
       HTTP_MAX_BODY_BYTES; a declared Content-Length over it is 413 `payload_too_large` unread,
       a chunked body is counted as it arrives and refused at the first byte over;
    4. the JSON guard: a JSON body under the maximum is checked by `guard_json` (depth, lone
       surrogates: 400 `invalid_request`), then replayed unchanged to the routes.

    All of it happens before routing, so before any dependency (the token check) runs. One
    middleware instead of three, and instead of Starlette's `ServerErrorMiddleware` (this is the
    500 handler: `EdgeApp`): one call and one `send` wrapper per request, the headers read once.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        service: str,
        metrics: ServiceMetrics,
        routes: Sequence[APIRoute],
        default_max_bytes: int,
    ) -> None:
        self.app = app
        self.service = service
        self.metrics = metrics
        self.tracer = trace.get_tracer(f"quiz.{service}.http")
        self.routes = routes
        self.default_max_bytes = default_max_bytes
        self._route_memo: dict[tuple[str, str], tuple[APIRoute | None, int]] = {}

    def _route_and_limit(self, scope: Scope) -> tuple[APIRoute | None, int]:
        key = (scope["method"], scope["path"])
        found = self._route_memo.get(key)
        if found is None:
            found = None, self.default_max_bytes
            for route in self.routes:
                if route.matches(scope)[0] is Match.FULL:
                    limit = route.max_body_size
                    found = route, self.default_max_bytes if limit is None else limit
                    break
            if len(self._route_memo) >= _ROUTE_MEMO_MAX:
                self._route_memo.clear()
            self._route_memo[key] = found
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            headers[name.decode("latin-1")] = value.decode("latin-1")
        request_id = new_request_id(headers.get("x-request-id"))
        scope.setdefault("state", {})["request_id"] = request_id
        id_header = (b"x-request-id", request_id.encode())
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), id_header]
            await send(message)

        method = scope["method"]
        path = scope["path"]
        traced = path not in _UNTRACED
        span = None
        token = None
        if traced:
            span = self.tracer.start_span(
                f"{method} {path}",
                context=extract_context(headers),
                kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "url.path": path},
            )
            token = otel_context.attach(trace.set_span_in_context(span))
        try:
            if method in ("GET", "HEAD", "OPTIONS"):
                await self.app(scope, receive, send_with_id)
            else:
                await self._guarded(scope, receive, send_with_id, headers)
        except Exception as e:
            log.exception(
                "%s: %s %s failed [request_id=%s]", self.service, method, path, request_id
            )
            if span is not None:
                span.record_exception(e)
            status = 500
            if not response_started:
                await _send_error(send, internal_error(request_id), request_id)
        finally:
            if span is not None and token is not None:
                otel_context.detach(token)
                route = scope.get("route")
                template = getattr(route, "path", None) or "unmatched"
                span.update_name(f"{method} {template}")
                span.set_attribute("http.route", template)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                span.end()
                self.metrics.http_requests.labels(template, method, str(status)).inc()
                self.metrics.http_duration.labels(template, method).observe(
                    time.perf_counter() - started
                )

    async def _guarded(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """The body limit and the JSON guard, then the routes with the body replayed."""
        route, limit = self._route_and_limit(scope)
        if route is not None:
            # Telemetry labels the request by this template even when we answer it here.
            scope["route"] = route
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_error(send, _too_large(limit))
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
                await _send_error(send, _too_large(limit))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        content_type = headers.get("content-type", "application/json")
        content_type = content_type.split(";")[0].strip().lower()
        if body and (content_type == "application/json" or content_type.endswith("+json")):
            try:
                guard_json(body)
            except ContractError as e:
                await _send_error(send, e)
                return
        await self.app(scope, _replay([body], None, receive), send)


def _too_large(limit: int) -> ContractError:
    return ContractError(
        ErrorCode.payload_too_large, f"request body over {limit} bytes, this route's maximum"
    )


async def _send_error(send: Send, error: ContractError, request_id: str | None = None) -> None:
    """A whole `{code, message}` response, sent from middleware (no Response object needed)."""
    body = json.dumps(
        error.to_body().model_dump(mode="json", exclude_none=True), separators=(",", ":")
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if request_id:
        headers.append((b"x-request-id", request_id.encode()))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class EdgeApp(FastAPI):
    """FastAPI whose middleware stack is the edge: `EdgeMiddleware` outermost, then the app's
    exception handlers (`ExceptionMiddleware`) and FastAPI's file-closing `AsyncExitStack`.

    Starlette's `ServerErrorMiddleware` (a plain-text 500, which `EdgeMiddleware`'s catch-all
    answers first as JSON), FastAPI's exception telemetry (off: the edge makes the span) and its
    app-wide body limit (the edge's is per route) are left out: three calls per request that
    did nothing here.
    """

    def build_middleware_stack(self) -> ASGIApp:
        assert self.user_middleware and self.user_middleware[0].cls is EdgeMiddleware, (
            "EdgeMiddleware is the outermost middleware: it is the 500 handler"
        )
        assert self.max_body_size is None, "body limits are EdgeMiddleware's, per route"
        handlers = {k: v for k, v in self.exception_handlers.items() if k not in (500, Exception)}
        middleware = [
            *self.user_middleware,
            Middleware(ExceptionMiddleware, handlers=handlers, debug=self.debug),
            Middleware(AsyncExitStackMiddleware),
        ]
        app: ASGIApp = self.router
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        return app


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
