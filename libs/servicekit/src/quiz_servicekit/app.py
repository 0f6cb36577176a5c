"""App factory and runtime shared by every service: lifespan, NATS micro, DB, health, metrics.

A service's main.py builds a `ServiceRuntime`, a `ServiceRef` for the object its lifespan builds,
its endpoints and routers (both given the ref), and hands them to `create_service_app`;
`run_service` is its console entry point (`serve`, the default, or `migrate`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import socket
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, NoReturn, TypeVar

import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from nats import errors as nats_errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.topology import StreamDecl
from quiz_servicekit.auth import JwtVerifier
from quiz_servicekit.db import Database, default_sqlite_url
from quiz_servicekit.docs import serve_docs
from quiz_servicekit.http import EdgeApp, EdgeMiddleware, ReadyCheck, install_error_handlers
from quiz_servicekit.http_protocol import EdgeConfig, EdgeHttpToolsProtocol
from quiz_servicekit.jetstream import (
    CONSUMER_CHECK_INTERVAL_S,
    REPLICA_CHECK_INTERVAL_S,
    ConsumerSpec,
    JetStreamKit,
)
from quiz_servicekit.jwks import JwksKeys
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.micro import EndpointSpec, MicroService, start_micro_service
from quiz_servicekit.migrate import upgrade
from quiz_servicekit.natsio import connect_nats, nats_auth
from quiz_servicekit.periodic import PeriodicTask, PeriodicTasks
from quiz_servicekit.settings import ServiceSettings, refusal_reason
from quiz_servicekit.telemetry import setup_tracing

log = logging.getLogger(__name__)
Hook = Callable[["ServiceRuntime"], Awaitable[None]]
S = TypeVar("S")
Settings = TypeVar("Settings", bound=ServiceSettings)


class ServiceRef(Generic[S]):
    """The object a service builds in its lifespan, reached the same way by routes and endpoints.

    Built after NATS and the database are up (`ref.set(...)` in `on_startup`); before that, and
    after nothing, `ref()` answers `unavailable` (HTTP 503 `{code, message}`). NATS endpoints,
    consumers and periodic tasks call `ref()`; HTTP routes are module-level functions on an
    `APIRouter` and take the value through a typed alias in the service's `deps.py`, which reads
    the ref from `request.app.state` (`PollServiceDep = Annotated[PollService,
    Depends(poll_service)]`, the FastAPI full-stack template's `api/deps.py` idiom).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._value: S | None = None

    def set(self, value: S) -> None:
        self._value = value

    @property
    def is_set(self) -> bool:
        return self._value is not None

    def __call__(self) -> S:
        if self._value is None:
            raise ContractError(ErrorCode.unavailable, f"the {self.what} is not started")
        return self._value

    async def resolve(self) -> S:
        """`ref()` as a FastAPI dependency, run on the event loop.

        A coroutine function because FastAPI runs a sync dependency (`Depends(ref)`) in a worker
        thread: a thread hop on every request, and a request waits for a free thread when the
        pool (40) is busy with blocking work.
        """
        return self()


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
        self._db: Database | None = None
        self.micro: MicroService | None = None
        # What the service runs besides its endpoints, declared next to them and started by
        # the lifespan after the service's own start-up hook.
        self.jetstream = JetStreamKit(name, self.metrics)
        self.periodic = PeriodicTasks(self.metrics)

    @property
    def nc(self) -> NATS:
        assert self._nc is not None, "NATS is connected in the lifespan"
        return self._nc

    @property
    def db(self) -> Database:
        assert self._db is not None, "this service was built without a database"
        return self._db

    def resolve_database_url(self) -> str:
        """DATABASE_URL, or the embedded SQLite file of this service under QUIZ_DATA_DIR."""
        return self.settings.database_url or default_sqlite_url(self.settings.data_dir, self.name)

    def migrate(self) -> None:
        """Upgrade the service's database to head (blocking; serialised across replicas)."""
        if self.migrations is None:
            log.info("%s has no migrations", self.name)
            return
        upgrade(self.resolve_database_url(), self.migrations)

    def add_endpoint(self, spec: EndpointSpec[Any]) -> None:
        self.endpoints.append(spec)

    def add_endpoints(self, specs: Sequence[EndpointSpec[Any]]) -> None:
        self.endpoints.extend(specs)

    def add_ready_check(self, name: str, check: ReadyCheck) -> None:
        self.ready_checks[name] = check

    def add_ready_detail(self, name: str, detail: Any) -> None:
        """A line `/readyz` shows under `details` without changing readiness, e.g. a warning
        that a safeguard is switched off for development."""
        self.ready_details[name] = detail

    @property
    def js(self) -> JetStreamContext:
        return self.nc.jetstream()

    @property
    def stream_replicas(self) -> int:
        """NATS_STREAM_REPLICAS: what a stream or KV bucket the service declares itself (in its
        start-up hook: `ensure_stream(…, replicas=)`, `lease_bucket(…, replicas=)`) is given."""
        return self.settings.nats_stream_replicas

    def watch_stream(self, stream: str, replicas: int | None = None) -> None:
        """Export the replica gauges of a stream declared outside `add_stream` (a KV bucket's
        `KV_<bucket>` from a start-up hook), declared with `replicas` (NATS_STREAM_REPLICAS)."""
        self.jetstream.watch(stream, replicas or self.stream_replicas)

    def add_stream(self, spec: StreamDecl) -> None:
        """A stream created or updated to `spec` at start-up (NATS_STREAM_REPLICAS replicas):
        the operators' role — no service user may (issue 29: services `use_stream` what
        provisioning made); tests that play the operator."""
        self.jetstream.add_stream(spec)

    def use_stream(self, name: str) -> None:
        """A stream the service publishes to or reads without a consumer: checked at start-up
        (BusNotProvisioned naming it when provisioning has not run), never created."""
        self.jetstream.use_stream(name)

    def add_consumer(self, spec: ConsumerSpec[Any]) -> None:
        """A durable pull consumer run from start-up to shutdown (`quiz_servicekit.jetstream`)."""
        self.jetstream.add_consumer(spec)

    def add_periodic(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Awaitable[object]],
        *,
        jitter: float = 0.1,
        run_at_start: bool = False,
    ) -> PeriodicTask:
        """`fn` every `interval_s` s (± jitter × interval) while the service runs."""
        return self.periodic.add(name, interval_s, fn, jitter=jitter, run_at_start=run_at_start)

    async def _start_background(self) -> None:
        """Streams, consumers and periodic tasks, once NATS is connected and the service is
        built. With streams to watch, a periodic task `stream_replicas` keeps their replica
        gauges current; with consumers, `consumer_info` their pending and redelivered gauges."""
        kit = self.jetstream
        await kit.start(self.nc, replicas=self.stream_replicas)
        if kit.watched and "stream_replicas" not in self.periodic:
            self.add_periodic(
                "stream_replicas", REPLICA_CHECK_INTERVAL_S, kit.refresh_replicas, run_at_start=True
            )
        if kit.workers and "consumer_info" not in self.periodic:
            self.add_periodic(
                "consumer_info", CONSUMER_CHECK_INTERVAL_S, kit.refresh_consumers, run_at_start=True
            )
        self.periodic.start()
        if kit.consumers:
            self.add_ready_check("consumers", kit.ready)

    async def _stop_background(self, grace_s: float = 10.0) -> None:
        """Periodic tasks first, then the consumers (stop fetching, finish or nak in-flight
        work within `grace_s`), before the micro service and NATS go."""
        await self.periodic.stop(grace_s)
        await self.jetstream.stop(grace_s)

    async def _nats_ready(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def _db_ready(self) -> bool:
        return await self.db.ping()


def setup_logging(level: str) -> None:
    """Plain lines on stderr; the dev runner prefixes and colours them per service."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        force=True,
    )
    # Alembic announces each of its plugins at INFO on every upgrade: noise, not news.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)


def create_service_app(
    runtime: ServiceRuntime,
    *,
    routers: Sequence[APIRouter] = (),
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
) -> FastAPI:
    """A FastAPI app whose lifespan connects NATS and the DB and registers the micro service.

    Start-up, in order (`_start`): logging and tracing, the database (migrated unless
    MIGRATE_ON_STARTUP=false), the JWKS URL's first fetch, NATS, `on_startup` (the service
    builds its object), consumers and periodic tasks, the micro registration. Shutdown
    (`_stop`) undoes it in reverse, `on_shutdown` once nothing calls the service any more.
    """
    settings = runtime.settings
    jwt_keys = _remote_keys(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await _start(runtime, getattr(app.state, "bound_port", None), jwt_keys, on_startup)
        # What start-up built (modules, pydantic schemas, routes, clients) lives as long
        # as the process: collected once, then frozen out of the cyclic collector's reach, so a
        # full collection scans only what requests create. In poll that was ~0.1 ms of CPU per
        # answer (0.03 per GET) spent in the collector before, ~0.04 after (docs/performance.md).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            # Collectable again: an app started and stopped in a longer-lived process (tests)
            # leaves nothing behind for good.
            gc.unfreeze()
            await _stop(runtime, jwt_keys, on_shutdown)

    # FastAPI's own telemetry is off: EdgeMiddleware makes the one SERVER span per request
    # and the Prometheus RED metrics, the same way for every service.
    app = EdgeApp(
        title=runtime.name,
        version=runtime.version,
        lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
        # FastAPI's pages load Swagger UI and ReDoc from a CDN; ours serve them locally.
        docs_url=None,
        redoc_url=None,
    )
    serve_docs(app)
    app.state.runtime = runtime
    # Fetched off the event loop, awaited by quiz_servicekit.auth.current_identity (item 4).
    app.state.jwt_keys = jwt_keys
    app.state.jwt_verifier = _verifier(settings, jwt_keys)
    install_error_handlers(app)
    # The whole edge in one middleware (quiz_servicekit.http): request id and catch-all, span
    # and RED metrics, body limit, JSON guard.
    service_routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    runtime.metrics.known_routes((r.path, r.methods or ()) for r in service_routes)
    app.add_middleware(
        EdgeMiddleware,
        service=runtime.name,
        metrics=runtime.metrics,
        routes=service_routes,
        default_max_bytes=settings.http_max_body_bytes,
    )
    app.include_router(health_router(runtime))
    for router in routers:
        app.include_router(router)
    return app


async def _start(
    runtime: ServiceRuntime,
    bound_port: int | None,
    jwt_keys: JwksKeys | None,
    on_startup: Hook | None,
) -> None:
    """The lifespan's start-up (see `create_service_app`); `bound_port`: the socket `serve`
    bound (HTTP_PORT=0 made known), else HTTP_PORT."""
    settings = runtime.settings
    setup_logging(settings.log_level)
    setup_tracing(runtime.name)
    runtime.http_url = (
        settings.public_url or f"http://{settings.http_host}:{bound_port or settings.http_port}"
    )
    if runtime.needs_db:
        url = runtime.database_url = runtime.resolve_database_url()
        if settings.migrate_on_startup:
            # Alembic is synchronous; keep the event loop free while it runs.
            await asyncio.to_thread(runtime.migrate)
        runtime._db = Database(url, threads=settings.db_threads, name=runtime.name)
        runtime.add_ready_check("database", runtime._db_ready)
    if jwt_keys is not None:
        jwt_keys.start()  # the first key set, fetched while NATS connects
    nc = runtime._nc = await connect_nats(
        settings.nats_url, runtime.name, **nats_auth(settings, runtime.name)
    )
    runtime.metrics.watch_connection(lambda: nc.is_connected)
    runtime.add_ready_check("nats", runtime._nats_ready)
    if on_startup is not None:
        await on_startup(runtime)
    await runtime._start_background()
    runtime.metrics.known_endpoints(spec.name for spec in runtime.endpoints)
    runtime.micro = await start_micro_service(
        nc,
        name=runtime.name,
        version=runtime.version,
        description=runtime.description,
        metadata={"http_url": runtime.http_url},
        endpoints=runtime.endpoints,
        metrics=runtime.metrics,
        default_concurrency=settings.nats_max_concurrency,
    )
    log.info("%s %s listening on %s", runtime.name, runtime.version, runtime.http_url)


async def _stop(
    runtime: ServiceRuntime, jwt_keys: JwksKeys | None, on_shutdown: Hook | None
) -> None:
    """The lifespan's shutdown: background work, the micro service, `on_shutdown`, NATS
    drained, the database, the JWKS fetcher."""
    await runtime._stop_background()
    if runtime.micro is not None:
        await runtime.micro.stop()
    if on_shutdown is not None:
        await on_shutdown(runtime)
    nc = runtime._nc
    if nc is not None and not nc.is_closed:
        try:
            await nc.drain()
        except (nats_errors.ConnectionReconnectingError, nats_errors.ConnectionClosedError):
            # The broker went first: nothing left to drain, close what remains.
            await nc.close()
    if runtime._db is not None:
        await asyncio.to_thread(runtime._db.close)
    if jwt_keys is not None:
        await jwt_keys.stop()


def _remote_keys(settings: ServiceSettings) -> JwksKeys | None:
    """The JWKS URL's keys (JWKS_URL), or None when tokens are checked against a file alone."""
    if not settings.jwks_url:
        return None
    return JwksKeys(
        settings.jwks_url,
        wait_s=settings.jwks_wait_s,
        fetch_timeout_s=settings.jwks_fetch_timeout_s,
        min_refresh_s=settings.jwks_min_refresh_s,
        cache_s=settings.jwks_cache_s,
    )


def _verifier(
    settings: ServiceSettings, remote_keys: JwksKeys | None
) -> JwtVerifier | _Unconfigured:
    """The token check: keys from JWKS_FILE and/or the URL; without either, every token fails."""
    if not (settings.jwks_file or remote_keys):
        return _Unconfigured()
    return JwtVerifier(
        jwks_file=settings.jwks_file,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        remote_keys=remote_keys,
    )


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
    """A uvicorn server for `app` without its own logging setup (ours is in the lifespan).

    Its HTTP/1.1 parser is httptools (llhttp, uvicorn's C parser) through
    `EdgeHttpToolsProtocol`: the header limit and the JSON refusals of requests the app never
    sees, and the deadlines and connection cap of `settings` (quiz_servicekit.http_protocol;
    HTTP_HEAD_TIMEOUT_S, HTTP_BODY_IDLE_TIMEOUT_S, HTTP_KEEP_ALIVE_S, HTTP_MAX_CONNECTIONS).
    No proxy-header rewriting: no service reads the
    client's address or scheme, and uvicorn's middleware for it is one more call per request.
    """
    config = EdgeConfig(
        app,
        head_timeout_s=settings.http_head_timeout_s,
        body_idle_timeout_s=settings.http_body_idle_timeout_s,
        max_connections=settings.http_max_connections,
        http=EdgeHttpToolsProtocol,
        timeout_keep_alive=settings.http_keep_alive_s,
        proxy_headers=False,
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    return uvicorn.Server(config)


def run_service(
    create_app: Callable[[Settings], FastAPI],
    settings: Callable[[], Settings],
    argv: Sequence[str] | None = None,
) -> None:
    """A service's console entry point: `serve` (default) or `migrate` (one-shot, for a Job).

    `settings`: the service's settings class (read from the environment here). A configuration
    that must not start — a setting that does not parse, or that `create_app` refuses (a
    ValueError: an unpriced model, a bad fallback table) — exits with status 2 and one
    `<service>: refused to start: <why>` on stderr instead of a traceback (LOG_LEVEL=DEBUG
    adds it).

    `migrate` upgrades the database to head and exits: run it as a Kubernetes Job before a
    rollout, with MIGRATE_ON_STARTUP=false on the pods (they migrate at start-up otherwise).
    """
    try:
        config = settings()
        app = create_app(config)
    except ValueError as e:  # pydantic's ValidationError and SettingsError are ValueErrors
        # The console script's name (quiz-llm-gateway), `python -m` included (`__main__`).
        spec = getattr(sys.modules.get(create_app.__module__), "__spec__", None)
        program = Path(sys.argv[0]).stem  # a script's own name
        if spec is not None:
            program = spec.name.split(".")[0].replace("_", "-")
        _refuse_to_start(program, refusal_reason(e, settings), e)
    runtime: ServiceRuntime = app.state.runtime
    parser = argparse.ArgumentParser(prog=runtime.name, description=runtime.description)
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate"])
    command = parser.parse_args(argv).command
    if command == "migrate":
        setup_logging(config.log_level)
        runtime.migrate()
        log.info("%s: database at head", runtime.name)
        return
    serve(app, config)


def _refuse_to_start(program: str, why: str, error: ValueError) -> NoReturn:
    """`<program>: refused to start: <why>` on stderr, status 2 (LOG_LEVEL=DEBUG: the
    traceback too)."""
    print(f"{program}: refused to start: {why}", file=sys.stderr)
    if os.environ.get("LOG_LEVEL", "").upper() == "DEBUG":
        traceback.print_exception(error)
    sys.exit(2)


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run the service until SIGINT/SIGTERM, then shut down cleanly."""
    setup_logging(settings.log_level)
    sock = bind_socket(settings.http_host, settings.http_port)
    app.state.bound_port = sock.getsockname()[1]
    server = uvicorn_server(app, settings)
    asyncio.run(server.serve(sockets=[sock]))
    if not server.started:
        sys.exit(1)
