"""HTTP edge: RED metrics and server spans per route, contract errors as `{code, message}`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.telemetry import extract_context

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
        first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        return error_response(
            ContractError(ErrorCode.invalid_request, f"{where}: {first.get('msg', 'invalid')}")
        )

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {
            401: ErrorCode.unauthorized,
            404: ErrorCode.not_found,
            405: ErrorCode.invalid_request,
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
