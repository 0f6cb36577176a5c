"""App factory and runtime shared by every service: lifespan, NATS micro, DB, health, metrics."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from nats import errors as nats_errors
from nats.aio.client import Client as NATS
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.auth import JwtVerifier
from quiz_servicekit.db import create_engine, default_sqlite_url, run_migrations
from quiz_servicekit.http import ReadyCheck, TelemetryMiddleware, install_error_handlers
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.micro import EndpointSpec, MicroService, start_micro_service
from quiz_servicekit.natsio import connect_nats
from quiz_servicekit.settings import ServiceSettings
from quiz_servicekit.telemetry import setup_tracing

log = logging.getLogger(__name__)
Hook = Callable[["ServiceRuntime"], Awaitable[None]]


class ServiceRuntime:
    """What a running service holds: settings, NATS, DB, metrics, endpoints, readiness checks."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        description: str,
        settings: ServiceSettings,
        migrations: str | Path | None = None,
        needs_db: bool = False,
    ) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.settings = settings
        self.migrations = migrations
        self.needs_db = needs_db or migrations is not None
        self.metrics = ServiceMetrics(name)
        self.endpoints: list[EndpointSpec[Any]] = []
        self.ready_checks: dict[str, ReadyCheck] = {}
        # Facts /readyz states beside its checks (e.g. the runner's isolation mode).
        self.ready_details: dict[str, Any] = {}
        self.http_url = ""
        self.database_url: str | None = None
        self._nc: NATS | None = None
        self._engine: AsyncEngine | None = None
        self.micro: MicroService | None = None

    @property
    def nc(self) -> NATS:
        assert self._nc is not None, "NATS is connected in the lifespan"
        return self._nc

    @property
    def engine(self) -> AsyncEngine:
        assert self._engine is not None, "this service was built without a database"
        return self._engine

    def add_endpoint(self, spec: EndpointSpec[Any]) -> None:
        self.endpoints.append(spec)

    def add_ready_check(self, name: str, check: ReadyCheck) -> None:
        self.ready_checks[name] = check

    async def _nats_ready(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def _db_ready(self) -> bool:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True


def setup_logging(level: str) -> None:
    """Plain lines on stderr; the dev runner prefixes and colours them per service."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        force=True,
    )


def create_service_app(
    runtime: ServiceRuntime,
    *,
    routers: Sequence[APIRouter] = (),
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
) -> FastAPI:
    """A FastAPI app whose lifespan connects NATS and the DB and registers the micro service."""
    settings = runtime.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setup_logging(settings.log_level)
        setup_tracing(runtime.name)
        port = getattr(app.state, "bound_port", None) or settings.http_port
        runtime.http_url = settings.public_url or f"http://{settings.http_host}:{port}"
        if runtime.needs_db:
            url = settings.database_url or default_sqlite_url(
                os.environ.get("QUIZ_DATA_DIR", ".data"), runtime.name
            )
            runtime.database_url = url
            if runtime.migrations is not None:
                # Alembic is synchronous; keep the event loop free while it runs.
                await asyncio.to_thread(run_migrations, url, runtime.migrations)
            runtime._engine = create_engine(url)
            runtime.add_ready_check("database", runtime._db_ready)
        runtime._nc = await connect_nats(settings.nats_url, runtime.name)
        runtime.add_ready_check("nats", runtime._nats_ready)
        if on_startup is not None:
            await on_startup(runtime)
        runtime.micro = await start_micro_service(
            runtime.nc,
            name=runtime.name,
            version=runtime.version,
            description=runtime.description,
            metadata={"http_url": runtime.http_url},
            endpoints=runtime.endpoints,
            metrics=runtime.metrics,
            default_concurrency=settings.nats_max_concurrency,
        )
        log.info("%s %s listening on %s", runtime.name, runtime.version, runtime.http_url)
        try:
            yield
        finally:
            await runtime.micro.stop()
            if on_shutdown is not None:
                await on_shutdown(runtime)
            if runtime._nc is not None and not runtime._nc.is_closed:
                try:
                    await runtime._nc.drain()
                except (nats_errors.ConnectionReconnectingError, nats_errors.ConnectionClosedError):
                    # The broker went first: nothing left to drain, close what remains.
                    await runtime._nc.close()
            if runtime._engine is not None:
                await runtime._engine.dispose()

    # FastAPI's own telemetry is off: TelemetryMiddleware makes the one SERVER span per request
    # and the Prometheus RED metrics, the same way for every service.
    app = FastAPI(
        title=runtime.name,
        version=runtime.version,
        lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.runtime = runtime
    app.state.jwt_verifier = (
        JwtVerifier(
            jwks_file=settings.jwks_file,
            jwks_url=settings.jwks_url,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
        )
        if settings.jwks_file or settings.jwks_url
        else _Unconfigured()
    )
    install_error_handlers(app)
    app.add_middleware(TelemetryMiddleware, metrics=runtime.metrics, service=runtime.name)
    app.include_router(health_router(runtime))
    for router in routers:
        app.include_router(router)
    return app


class _Unconfigured:
    """Fails closed: without keys no token is ever accepted."""

    def verify(self, token: str) -> Any:
        raise ContractError(ErrorCode.unauthorized, "JWT verification is not configured")


def health_router(runtime: ServiceRuntime) -> APIRouter:
    """`/healthz` (the process answers), `/readyz` (its dependencies answer), `/metrics`."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": runtime.name, "version": runtime.version}

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        checks: dict[str, Any] = {}
        for name, check in runtime.ready_checks.items():
            try:
                checks[name] = bool(await asyncio.wait_for(check(), timeout=2))
            except Exception as e:
                checks[name] = False
                log.warning("readiness check %s failed: %s", name, e)
        ready = bool(checks) and all(checks.values())
        body: dict[str, Any] = {"status": "ready" if ready else "not_ready", "checks": checks}
        if runtime.ready_details:
            body["details"] = runtime.ready_details
        return JSONResponse(body, status_code=200 if ready else 503)

    @router.get("/metrics")
    async def metrics(_: Request) -> Response:
        return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return router


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket bound before the app starts, so a port of 0 is known in the lifespan."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio turns Nagle off on accepted connections only when the listening
    # socket says it is TCP; a plain socket() would add ~40 ms to small replies.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def uvicorn_server(app: FastAPI, settings: ServiceSettings) -> uvicorn.Server:
    """A uvicorn server for `app` without its own logging setup (ours is in the lifespan)."""
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    return uvicorn.Server(config)


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run the service until SIGINT/SIGTERM, then shut down cleanly."""
    setup_logging(settings.log_level)
    sock = bind_socket(settings.http_host, settings.http_port)
    app.state.bound_port = sock.getsockname()[1]
    server = uvicorn_server(app, settings)
    asyncio.run(server.serve(sockets=[sock]))
    if not server.started:
        sys.exit(1)
