"""NATS Services API (nats.micro) registration with typed, concurrent, traced endpoints."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, Service
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, ValidationError

from quiz_contracts import catalog
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.edge import guard_json, internal_error, invalid_request, new_request_id
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.tasks import TaskSet
from quiz_servicekit.telemetry import current_trace_id, extract_context

log = logging.getLogger(__name__)
Req = TypeVar("Req", bound=BaseModel)


@dataclass(frozen=True)
class MsgContext:
    """What a handler may know of the message besides its payload."""

    subject: str
    headers: dict[str, str]


Handler = Callable[[Req, MsgContext], Awaitable[BaseModel]]


@dataclass
class EndpointSpec(Generic[Req]):
    """One request/reply endpoint: subject, request model, and the handler that answers it."""

    name: str
    subject: str
    request_model: type[Req]
    handler: Handler[Req]
    # Requests of this endpoint handled at once; None takes the service default.
    max_concurrency: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def endpoint(
    subject: str,
    handler: Handler[Any],
    *,
    name: str | None = None,
    max_concurrency: int | None = None,
    metadata: dict[str, str] | None = None,
) -> EndpointSpec[Any]:
    """The endpoint of a catalog operation: its request model is the catalog's, never a copy.

    `name` defaults to the subject's last token (`llm.v1.complete` → `complete`). Raises
    KeyError for a subject the catalog does not list: add the operation there first.
    """
    op = catalog.operation(subject)
    return EndpointSpec(
        name or subject.rsplit(".", 1)[-1],
        op.subject,
        op.request,
        handler,
        max_concurrency=max_concurrency,
        metadata=dict(metadata or {}),
    )


def _check_against_catalog(spec: EndpointSpec[Any]) -> None:
    """A served subject that the catalog lists must decode the catalog's request model."""
    try:
        op = catalog.operation(spec.subject)
    except KeyError:
        return
    if op.request is not spec.request_model:
        raise ValueError(
            f"{spec.subject} decodes {spec.request_model.__name__}; the catalog says "
            f"{op.request.__name__}"
        )


class MicroService:
    """A registered nats.micro service whose endpoints never serialise on one subscription."""

    def __init__(self, service: Service, tasks: TaskSet) -> None:
        self.service = service
        self._tasks = tasks

    async def stop(self, grace_s: float = 10.0) -> None:
        """Unsubscribe, then let the requests in hand finish (bounded by `grace_s`)."""
        await self.service.stop()
        await self._tasks.wait(grace_s)


async def start_micro_service(
    nc: NATS,
    *,
    name: str,
    version: str,
    description: str,
    metadata: dict[str, str],
    endpoints: list[EndpointSpec[Any]],
    metrics: ServiceMetrics,
    default_concurrency: int = 256,
) -> MicroService:
    """Register `name` with its endpoints in the queue group `name`."""
    service = await add_service(
        nc,
        name=name,
        version=version,
        description=description,
        metadata=metadata,
        queue_group=name,
    )
    tasks = TaskSet(f"micro:{name}")
    tracer = trace.get_tracer(f"quiz.{name}")
    for spec in endpoints:
        _check_against_catalog(spec)
        limit = spec.max_concurrency or default_concurrency
        stats: list[Any] = []  # the nats-py Endpoint, once registered
        handler = _dispatcher(spec, asyncio.Semaphore(limit), tasks, metrics, tracer, stats)
        await service.add_endpoint(
            EndpointConfig(
                name=spec.name,
                subject=spec.subject,
                handler=handler,
                metadata={"max_concurrency": str(limit), **spec.metadata},
            )
        )
        # nats-py counts an error only when the callback raises; ours answers errors from a
        # task, so it counts them itself (the Endpoint is the last one add_endpoint appended).
        stats.append(service._endpoints[-1])
    # The subscriptions reach the server before the service says it listens: a request sent
    # right after start-up would otherwise find no responders (a test asking at once did).
    await nc.flush()
    return MicroService(service, tasks)


def _dispatcher(
    spec: EndpointSpec[Any],
    slots: asyncio.Semaphore,
    tasks: TaskSet,
    metrics: ServiceMetrics,
    tracer: trace.Tracer,
    stats: list[Any] | None = None,
) -> Callable[[Request], Awaitable[None]]:
    """nats-py runs a subscription's callbacks one at a time: hand each request to a task.

    Waiting for a slot inside the callback is the back-pressure: past `max_concurrency`,
    messages wait in the subscription's pending queue instead of piling up as tasks.
    """

    async def on_request(req: Request) -> None:
        await slots.acquire()
        tasks.spawn(_handle(req))

    async def _handle(req: Request) -> None:
        started = time.perf_counter()
        headers = dict(req.headers or {})
        outcome = "ok"
        metrics.nats_in_flight.labels(spec.name).inc()
        try:
            with tracer.start_as_current_span(
                f"process {spec.subject}",
                context=extract_context(headers),
                kind=SpanKind.CONSUMER,
                attributes={"messaging.system": "nats", "messaging.destination.name": spec.subject},
            ) as span:
                try:
                    guard_json(req.data)
                    payload = spec.request_model.model_validate_json(req.data)
                    reply = await spec.handler(payload, MsgContext(req.subject, headers))
                    await req.respond(reply.model_dump_json().encode())
                except ValidationError as e:
                    outcome = ErrorCode.invalid_request.value
                    await _respond_error(req, invalid_request(e.errors()))
                except ContractError as e:
                    outcome = e.code.value
                    span.set_attribute("error.type", outcome)
                    await _respond_error(req, e)
                except Exception as e:
                    outcome = ErrorCode.internal.value
                    request_id = current_trace_id() or new_request_id()
                    log.exception("endpoint %s failed [request_id=%s]", spec.name, request_id)
                    span.set_status(Status(StatusCode.ERROR, type(e).__name__))
                    await _respond_error(req, internal_error(request_id))
        except Exception:
            # The reply itself failed (connection lost): nothing left to tell the caller.
            log.exception("endpoint %s could not reply", spec.name)
        finally:
            slots.release()
            if outcome != "ok" and stats:
                # `$SRV.STATS` num_errors / last_error count every error reply.
                stats[0]._num_errors += 1
                stats[0]._last_error = outcome
            metrics.nats_in_flight.labels(spec.name).dec()
            metrics.nats_requests.labels(spec.name, outcome).inc()
            metrics.nats_duration.labels(spec.name).observe(time.perf_counter() - started)

    return on_request


async def _respond_error(req: Request, error: ContractError) -> None:
    """The micro error convention: `Nats-Service-Error` our code, `-Code` its HTTP status.

    The data is the ErrorBody, so a caller reads the same `{code, message}` as over HTTP.
    """
    await req.respond_error(
        str(error.status),
        error.code.value,
        data=error.to_body().model_dump_json(exclude_none=True).encode(),
    )
