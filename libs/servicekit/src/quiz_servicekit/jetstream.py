"""JetStream kit: declared streams and durable pull consumers, at-least-once work, dead letters.

A service declares what it uses and consumes next to its endpoints (`consumers.py`):

    runtime.use_stream("REVIEW_EVENTS")        # it publishes there
    runtime.add_consumer(ConsumerSpec("review-requests", "REVIEW_REQUESTS", ReviewRequest, handle))

Streams are provisioned by operations, never by a service (issue 29 item 1,
`quiz_servicekit.provision` from `quiz_contracts.topology`): at start-up the kit checks that every
stream it uses, its consumers' streams and the dead-letter streams exist, and stops the start
with `BusNotProvisioned` naming what is missing and the command that provisions it. Each
consumer (named in the topology: the bus lets a service run those names only) is then updated
to the service's config; a change the server cannot apply (deliver policy, push/pull…) stops
the start with a `JetStreamConfigError` that names the fields. `add_stream` (create or update a
stream to a StreamDecl, `ensure_stream`) is the operators' role: provisioning, and tests that
play it. A stream ensured with fewer replicas than NATS_STREAM_REPLICAS is scaled up (logged),
one with more keeps them (never scaled down). Each consumer is a durable pull consumer with
explicit acks, `max_deliver` and `ack_wait`; a worker fetches while it has free slots
(`max_in_flight` messages at once) and hands each message to its own task, which:

- decodes the payload into the consumer's pydantic model: a payload that does not decode is
  dead-lettered and terminated at once (no retry can fix it);
- calls `handler(model, delivery)`, sending in-progress acks every `ack_wait_s / 3` so long work
  is not redelivered; `timeout_s` bounds the work;
- returns → ack; raises `PermanentError` (or a ContractError whose code is in
  `permanent_codes`) → dead letter + terminate; raises anything else → nak with a delay from
  `nak_delays_s` (or the error's `retry_after_s`), and on the last delivery `max_deliver`
  allows → dead letter + terminate.

Delivery is at least once: a handler must be idempotent, keyed by a business id. Dead letters:
`quiz_servicekit.dead_letters`. Trace context travels in the message headers: `publish()` makes
a PRODUCER span and injects it, the worker makes a CONSUMER span from it.

Metrics (prefix `quiz_<service>_`):
- `consumer_messages_total{consumer,outcome}`: outcome `ok`, `retry`, `invalid`, `permanent`,
  `exhausted` or `interrupted` (nak'ed at shutdown)
- `consumer_message_duration_seconds{consumer}` and `consumer_messages_in_flight{consumer}`
- `consumer_max_in_flight{consumer}`: the consumer's `max_in_flight` (in flight at it: no free
  slot on this replica)
- `dead_letters_total{consumer,reason}`: dead letters written by this service
- `consumer_pending{consumer}`, `consumer_ack_pending{consumer}`,
  `consumer_redelivered{consumer}`: the server's view of the durable (all replicas): messages
  not yet delivered, delivered and not yet acked, redelivered and not yet acked; read from
  consumer info every `CONSUMER_CHECK_INTERVAL_S` (a backlog that grows while the service is
  off the bus, or work that keeps failing, shows there)

The counters start at 0 for every consumer and outcome (dead letters: every reason), so the
first dead letter is an increase (issue 35).
- `stream_replicas{stream}`: the stream's current replicas (its leader and the followers caught
  up with it; 0 without a leader), `stream_replicas_configured{stream}`: what the service
  declared (NATS_STREAM_REPLICAS or the spec's) — for every stream, dead-letter stream and
  watched KV bucket stream, read from stream info every `REPLICA_CHECK_INTERVAL_S`
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import Counter, Gauge, Histogram
from pydantic import BaseModel, ValidationError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.topology import StreamDecl
from quiz_servicekit.dead_letters import (
    ADVISORY_STREAM,
    DEAD_LETTER_STREAM,
    ConsumerAdvisory,
    DeadLetterReason,
    advisory_subjects,
    forward_advisory,
    write_dead_letter,
)
from quiz_servicekit.metrics import LATENCY_BUCKETS, ServiceMetrics, zero
from quiz_servicekit.tasks import TaskSet
from quiz_servicekit.telemetry import extract_context, inject_headers

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
# JetStream API error: "stream name already in use with a different configuration".
_STREAM_EXISTS_OTHERWISE = 10058
# Handler durations: consumers do slow work (model calls), so the buckets reach minutes.
WORK_BUCKETS = (*LATENCY_BUCKETS, 120, 300, 600)
# How often the streams' replica gauges are read from stream info (one request per stream).
REPLICA_CHECK_INTERVAL_S = 30.0
# How often the consumers' pending and redelivered gauges are read (one request per consumer).
CONSUMER_CHECK_INTERVAL_S = 15.0
# Every outcome of `consumer_messages_total` (ConsumerWorker._handle).
CONSUMER_OUTCOMES = ("ok", "retry", "interrupted", *(r.value for r in DeadLetterReason))


class JetStreamConfigError(RuntimeError):
    """A declared stream or consumer cannot be created or brought to its declared config."""


PROVISION_HINT = (
    "the bus is not provisioned: run `make provision` (python -m quiz_servicekit.provision, as "
    "the ops user; compose: the `provision` service; Kubernetes: the Job bus-provision)"
)


class BusNotProvisioned(RuntimeError):
    """A stream or KV bucket a service uses does not exist: provisioning has not run."""


async def missing(
    js: JetStreamContext,
    *,
    streams: Iterable[str] = (),
    consumers: Iterable[tuple[str, str]] = (),
    buckets: Iterable[str] = (),
) -> list[str]:
    """What of `streams`, `consumers` ((stream, name)) and `buckets` does not exist (names,
    `stream/consumer`, `KV_<bucket>`); empty when everything does. Read-only (stream and
    consumer info, which a service user may ask for what it uses)."""
    absent: list[str] = []
    for name in dict.fromkeys([*streams, *(f"KV_{b}" for b in buckets)]):
        try:
            await js.stream_info(name)
        except NotFoundError:
            absent.append(name)
    for stream, name in consumers:
        if stream in absent:
            continue
        try:
            await js.consumer_info(stream, name)
        except NotFoundError:
            absent.append(f"{stream}/{name}")
    return absent


async def require(
    js: JetStreamContext,
    service: str,
    *,
    streams: Iterable[str] = (),
    consumers: Iterable[tuple[str, str]] = (),
    buckets: Iterable[str] = (),
) -> None:
    """BusNotProvisioned (and an ERROR log line) when anything `service` uses is missing."""
    absent = await missing(js, streams=streams, consumers=consumers, buckets=buckets)
    if absent:
        message = f"{service}: missing on the bus: {', '.join(absent)}; {PROVISION_HINT}"
        log.error("%s", message)
        raise BusNotProvisioned(message)


def stream_config(decl: StreamDecl, replicas: int = 1) -> api.StreamConfig:
    """The server's config of a declared stream (`quiz_contracts.topology.StreamDecl`, the one
    statement of a stream's fields: provisioning's streams and the ones tests declare), with
    `replicas` replicas (NATS_STREAM_REPLICAS, or provisioning's `--replicas`)."""
    return api.StreamConfig(
        name=decl.name,
        description=decl.description or None,
        subjects=list(decl.subjects),
        retention=api.RetentionPolicy(decl.retention),
        storage=api.StorageType(decl.storage),
        max_age=decl.max_age_s,
        duplicate_window=decl.duplicate_window_s,
        max_msg_size=decl.max_msg_size,
        num_replicas=replicas,
    )


class DurableFields(Protocol):
    """What a durable pull consumer's config is made of: a topology `ConsumerDecl` (what
    provisioning creates) and a service's `ConsumerSpec` (what it updates its consumer to)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def ack_wait_s(self) -> float: ...
    @property
    def max_deliver(self) -> int: ...
    @property
    def filter_subjects(self) -> tuple[str, ...]: ...
    @property
    def max_ack_pending(self) -> int | None: ...


def consumer_config(c: DurableFields) -> api.ConsumerConfig:
    """The durable pull consumer `c`: explicit acks, from the stream's start, its filter (one
    subject, several, or none: the whole stream); `max_ack_pending` None: the server's default."""
    one = len(c.filter_subjects) == 1
    return api.ConsumerConfig(
        name=c.name,
        durable_name=c.name,
        description=c.description or None,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=c.ack_wait_s,
        max_deliver=c.max_deliver,
        max_ack_pending=c.max_ack_pending,
        filter_subject=c.filter_subjects[0] if one else None,
        filter_subjects=list(c.filter_subjects) if len(c.filter_subjects) > 1 else None,
    )


class PermanentError(ContractError):
    """A failure no retry can fix: the message is dead-lettered and terminated, not redelivered."""


@dataclass(frozen=True)
class Delivery:
    """What a consumer handler may know of a message besides its payload."""

    subject: str
    stream: str
    consumer: str
    stream_seq: int
    num_delivered: int  # 1 on the first delivery
    max_deliver: int
    msg_id: str | None  # the publisher's Nats-Msg-Id
    published_at: dt.datetime
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def redelivered(self) -> bool:
        return self.num_delivered > 1

    @property
    def last_attempt(self) -> bool:
        """True when a failure now dead-letters the message instead of retrying it."""
        return self.num_delivered >= self.max_deliver


ConsumerHandler = Callable[[M, Delivery], Awaitable[None]]


@dataclass(frozen=True)
class ConsumerSpec(Generic[M]):
    """A durable pull consumer on `stream` whose messages decode into `model` for `handler`."""

    name: str
    stream: str
    model: type[M]
    handler: ConsumerHandler[M]
    # Subjects of the stream this consumer reads; empty reads the whole stream.
    filter_subjects: tuple[str, ...] = ()
    ack_wait_s: float = 30.0
    max_deliver: int = 5
    # Messages handled at once by one replica.
    max_in_flight: int = 8
    # Unacked messages across all replicas (the server's max_ack_pending); None: server default.
    max_ack_pending: int | None = None
    # Delay before redelivery after the n-th failed delivery (the last one repeats).
    nak_delays_s: tuple[float, ...] = (1.0, 5.0, 30.0, 120.0)
    # Contract errors with these codes are permanent, like PermanentError.
    permanent_codes: frozenset[ErrorCode] = frozenset({ErrorCode.invalid_request})
    # In-progress acks every ack_wait_s / 3 while the handler works.
    in_progress_acks: bool = True
    # Work longer than this is cancelled and counts as a failed delivery; None: no bound.
    timeout_s: float | None = 600.0
    # How long one pull request waits for a message; also bounds how long stop() waits for it.
    fetch_timeout_s: float = 2.0
    description: str = ""

    def __post_init__(self) -> None:
        if self.max_deliver < 1:
            raise ValueError(f"consumer {self.name}: max_deliver must be >= 1")
        if self.ack_wait_s <= 0 or self.max_in_flight < 1 or not self.nak_delays_s:
            raise ValueError(
                f"consumer {self.name}: ack_wait_s > 0, max_in_flight >= 1 and at least one "
                "nak delay are required"
            )

    def nak_delay(self, num_delivered: int) -> float:
        return self.nak_delays_s[min(num_delivered, len(self.nak_delays_s)) - 1]


def _differences(declared: api.Base, existing: api.Base) -> list[str]:
    """`field: existing → declared` for every field the declaration sets to another value."""
    out = []
    for name, want in vars(declared).items():
        have = getattr(existing, name, None)
        if want is None or name == "name":
            continue
        if isinstance(want, float) and isinstance(have, int | float) and abs(want - have) < 1e-6:
            continue
        if want != have:
            out.append(f"{name}: {_plain(have)} → {_plain(want)}")
    return out


def _plain(value: object) -> str:
    return repr(value.value if isinstance(value, Enum) else value)


async def ensure_stream(
    js: JetStreamContext, spec: StreamDecl | api.StreamConfig, *, replicas: int | None = None
) -> api.StreamInfo:
    """Create the stream or update it to the declared config; JetStreamConfigError if impossible.

    `replicas` (the service's NATS_STREAM_REPLICAS; 1 when None) is a StreamDecl's, and
    overrides a StreamConfig's `num_replicas` when given. An existing
    stream with fewer replicas is scaled up to them (the server copies it to the new nodes in
    the background); one with more keeps its count. A single node refuses more than one
    replica: JetStreamConfigError naming the setting. A scale-up returns once the new
    replicas are current (`wait_replicated`).
    """
    info, scaled = await _declare_stream(js, spec, replicas)
    if scaled:
        info = await wait_replicated(js, info.config.name or "", info.config.num_replicas or 1)
    return info


async def _declare_stream(
    js: JetStreamContext, spec: StreamDecl | api.StreamConfig, replicas: int | None
) -> tuple[api.StreamInfo, bool]:
    """`ensure_stream` without the wait: the stream's info, and whether it was scaled up."""
    if isinstance(spec, StreamDecl):
        config = stream_config(spec, replicas or 1)
    else:
        config = spec if replicas is None else spec.evolve(num_replicas=replicas)
    name = config.name
    try:
        return await js.add_stream(config), False
    except APIError as e:
        if e.err_code != _STREAM_EXISTS_OTHERWISE:
            hint = (
                f" (declared with {config.num_replicas} replicas: NATS_STREAM_REPLICAS must not "
                "exceed the JetStream nodes of the cluster, and is 1 on a single server)"
                if (config.num_replicas or 1) > 1
                else ""
            )
            raise JetStreamConfigError(f"stream {name}: {e.description}{hint}") from e
    existing = await js.stream_info(str(name))
    have = existing.config.num_replicas or 1
    want = config.num_replicas or 1
    if have > want:
        # Never scale down: a replica count set higher elsewhere is kept.
        config = config.evolve(num_replicas=have)
    changes = _differences(config, existing.config)
    if not changes:
        return existing, False
    try:
        info = await js.update_stream(config)
    except APIError as e:
        raise JetStreamConfigError(
            f"stream {name} exists with a config the server cannot change to the declared one "
            f"({e.description}; {'; '.join(changes) or 'no field differs'}). Change the "
            "declaration back, or migrate the stream by hand (docs/jetstream.md)."
        ) from e
    log.info("stream %s updated to its declared config: %s", name, "; ".join(changes))
    if want > have:
        log.warning(
            "stream %s scaled up from %d to %d replicas (NATS_STREAM_REPLICAS)", name, have, want
        )
    return info, want > have


async def wait_replicated(
    js: JetStreamContext, stream: str, replicas: int, *, timeout_s: float = 60.0
) -> api.StreamInfo:
    """Wait until `stream` has a leader and `replicas - 1` current followers, after a scale-up.

    The new peers copy the stream in the background; until they are current the server refuses
    to create consumers on it (`insufficient resources`), so a start-up that scaled a stream up
    waits here. JetStreamConfigError after `timeout_s` (a stream too large to copy in that time
    is scaled by hand: docs/operations.md "Running on a cluster").
    """
    deadline = time.monotonic() + timeout_s
    while True:
        info = await js.stream_info(stream)
        cluster = info.cluster
        followers = [p for p in (cluster.replicas or []) if p.current] if cluster else []
        if cluster is not None and cluster.leader and len(followers) >= replicas - 1:
            return info
        if time.monotonic() > deadline:
            raise JetStreamConfigError(
                f"stream {stream}: {len(followers) + 1} of {replicas} replicas current after "
                f"{timeout_s:g} s of scaling up"
            )
        await asyncio.sleep(0.2)


async def ensure_consumer(
    js: JetStreamContext, stream: str, config: api.ConsumerConfig
) -> api.ConsumerInfo:
    """Create the durable consumer or update it to `config`; JetStreamConfigError if impossible."""
    try:
        return await js.add_consumer(stream, config)
    except APIError as e:
        try:
            existing = await js.consumer_info(stream, str(config.durable_name))
            changes = "; ".join(_differences(config, existing.config)) or "no field differs"
        except APIError:
            changes = "it does not exist yet"
        raise JetStreamConfigError(
            f"consumer {config.durable_name} on stream {stream}: {e.description} ({changes}). "
            "Change the declaration back, or delete the consumer by hand (docs/jetstream.md)."
        ) from e


async def publish(
    js: JetStreamContext,
    subject: str,
    payload: BaseModel,
    *,
    msg_id: str,
    headers: Mapping[str, str] | None = None,
    stream: str | None = None,
    timeout_s: float = 5.0,
) -> api.PubAck:
    """Publish `payload` to a stream with `Nats-Msg-Id: msg_id` (a business id) and trace headers.

    A second publish of the same id inside the stream's duplicate window is stored once; the
    returned PubAck then has `duplicate=True`. No stream on the subject → ContractError
    `unavailable`; no answer within `timeout_s` → `timeout`.
    """
    tracer = trace.get_tracer("quiz_servicekit.jetstream")
    with tracer.start_as_current_span(
        f"send {subject}",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": "nats",
            "messaging.destination.name": subject,
            "messaging.message.id": msg_id,
        },
    ) as span:
        out = inject_headers(dict(headers or {}))
        out[api.Header.MSG_ID.value] = msg_id
        try:
            ack = await js.publish(
                subject,
                payload.model_dump_json().encode(),
                timeout=timeout_s,
                stream=stream,
                headers=out,
            )
        except NoStreamResponseError as e:
            span.set_status(Status(StatusCode.ERROR, "no stream"))
            raise ContractError(ErrorCode.unavailable, f"no stream stores {subject}") from e
        except TimeoutError as e:
            span.set_status(Status(StatusCode.ERROR, "timeout"))
            raise ContractError(
                ErrorCode.timeout, f"JetStream did not acknowledge {subject} in {timeout_s:g} s"
            ) from e
        except APIError as e:
            span.set_status(Status(StatusCode.ERROR, str(e.description)))
            raise ContractError(ErrorCode.unavailable, f"{subject}: {e.description}") from e
        span.set_attribute("messaging.nats.duplicate", bool(ack.duplicate))
        return ack


class ConsumerMetrics:
    """RED metrics of a service's JetStream consumers (see the module docstring)."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        p, r = metrics.prefix, metrics.registry
        self.messages = Counter(
            f"{p}_consumer_messages_total",
            "JetStream messages handled, by consumer and outcome.",
            ["consumer", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            f"{p}_consumer_message_duration_seconds",
            "Time from a message's delivery to its ack, nak or term, by consumer.",
            ["consumer"],
            buckets=WORK_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            f"{p}_consumer_messages_in_flight",
            "JetStream messages being handled now, by consumer.",
            ["consumer"],
            registry=r,
        )
        self.dead_letters = Counter(
            f"{p}_dead_letters_total",
            "Dead letters written by this service, by consumer and reason.",
            ["consumer", "reason"],
            registry=r,
        )
        self.max_in_flight = Gauge(
            f"{p}_consumer_max_in_flight",
            "Messages a consumer handles at once on this replica (its max_in_flight).",
            ["consumer"],
            registry=r,
        )
        self.pending = Gauge(
            f"{p}_consumer_pending",
            "Messages of a consumer's stream not yet delivered to it (consumer info).",
            ["consumer"],
            registry=r,
        )
        self.ack_pending = Gauge(
            f"{p}_consumer_ack_pending",
            "Messages delivered to a consumer and not yet acked (consumer info).",
            ["consumer"],
            registry=r,
        )
        self.redelivered = Gauge(
            f"{p}_consumer_redelivered",
            "Messages redelivered to a consumer and not yet acked (consumer info).",
            ["consumer"],
            registry=r,
        )

    def known(self, consumer: str) -> None:
        """`consumer`'s counters at 0 for every outcome and dead-letter reason."""
        zero(self.messages, [consumer], CONSUMER_OUTCOMES)
        zero(self.dead_letters, [consumer], [r.value for r in DeadLetterReason])

    def read(self, consumer: str, info: api.ConsumerInfo) -> None:
        """The gauges of `consumer` from its consumer info."""
        self.pending.labels(consumer).set(info.num_pending or 0)
        self.ack_pending.labels(consumer).set(info.num_ack_pending or 0)
        self.redelivered.labels(consumer).set(info.num_redelivered or 0)


class StreamMetrics:
    """Replicas of the streams a service declares: current and configured, by stream."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        p, r = metrics.prefix, metrics.registry
        self.replicas = Gauge(
            f"{p}_stream_replicas",
            "Current replicas of a stream: its leader and the followers caught up with it.",
            ["stream"],
            registry=r,
        )
        self.configured = Gauge(
            f"{p}_stream_replicas_configured",
            "Replicas the service declares for a stream (NATS_STREAM_REPLICAS or its spec's).",
            ["stream"],
            registry=r,
        )


def current_replicas(info: api.StreamInfo) -> int:
    """The leader and its current, online followers; 1 on a single server; 0 with no leader."""
    cluster = info.cluster
    if cluster is None or not (cluster.replicas or cluster.leader):
        return 1  # a single server: the stream is where it is
    if not cluster.leader:
        return 0
    return 1 + sum(1 for p in cluster.replicas or [] if p.current and not p.offline)


def _describe(e: ValidationError) -> str:
    first = e.errors()[0] if e.errors() else {"loc": (), "msg": str(e)}
    where = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"payload is not a valid message: {where}: {first.get('msg', 'invalid')}"


class ConsumerWorker(Generic[M]):
    """Runs one ConsumerSpec: the fetch loop, one task per message, graceful stop."""

    def __init__(
        self,
        nc: NATS,
        spec: ConsumerSpec[M],
        metrics: ConsumerMetrics,
        *,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.spec = spec
        self._nc = nc
        self._js = nc.jetstream()
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("quiz_servicekit.jetstream")
        self._slots = asyncio.Semaphore(spec.max_in_flight)
        self._tasks = TaskSet(f"consumer:{spec.name}")
        self._sub: JetStreamContext.PullSubscription | None = None
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        self._healthy = False

    async def start(self) -> None:
        """Declare the consumer and start fetching."""
        await ensure_consumer(self._js, self.spec.stream, consumer_config(self.spec))
        self._metrics.max_in_flight.labels(self.spec.name).set(self.spec.max_in_flight)
        self._metrics.known(self.spec.name)
        self._sub = await self._js.pull_subscribe_bind(self.spec.name, stream=self.spec.stream)
        self._healthy = True
        self._loop = asyncio.create_task(self._fetch_loop(), name=f"consumer:{self.spec.name}")

    def ready(self) -> bool:
        """Fetching, and the last pull request did not fail."""
        return (
            not self._stopping
            and self._loop is not None
            and not self._loop.done()
            and self._healthy
            and self._nc.is_connected
        )

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop fetching, give in-flight work `grace_s` to finish, nak what is left."""
        self._stopping = True
        deadline = time.monotonic() + grace_s
        if self._loop is not None and not self._loop.done():
            # The pull request in progress ends within fetch_timeout_s: waiting for it means no
            # message is delivered to an inbox nobody reads (it would wait out ack_wait).
            await asyncio.wait({self._loop}, timeout=min(grace_s, self.spec.fetch_timeout_s + 1))
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        await self._tasks.drain(max(0.0, deadline - time.monotonic()))
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _fetch_loop(self) -> None:
        assert self._sub is not None
        failures = 0
        while not self._stopping:
            await self._slots.acquire()
            msgs: list[Msg] = []
            try:
                # One message per pull: nats-py's batched fetch holds the first message until
                # the batch fills or the request expires, which would delay it by seconds.
                msgs = await self._sub.fetch(1, timeout=self.spec.fetch_timeout_s)
                self._healthy, failures = True, 0
            except TimeoutError:
                self._healthy, failures = True, 0
            except ConnectionClosedError:
                self._slots.release()
                return
            except Exception as e:
                failures += 1
                self._healthy = False
                log.warning("consumer %s: pull failed (%s); retrying", self.spec.name, e)
                await asyncio.sleep(min(10.0, 0.5 * 2**failures))
                await self._redeclare()
            if not msgs:
                self._slots.release()
                continue
            for msg in msgs:
                if self._stopping:
                    # Fetched while stopping: hand it back at once rather than start work.
                    with contextlib.suppress(Exception):
                        await msg.nak()
                    self._metrics.messages.labels(self.spec.name, "interrupted").inc()
                    self._slots.release()
                    continue
                self._tasks.spawn(self._handle(msg))

    async def _redeclare(self) -> None:
        """The consumer may have been deleted by hand: declare it again."""
        try:
            await ensure_consumer(self._js, self.spec.stream, consumer_config(self.spec))
        except Exception as e:
            log.warning("consumer %s: could not declare it again: %s", self.spec.name, e)

    def _delivery(self, msg: Msg) -> Delivery:
        meta = msg.metadata
        headers = {str(k): str(v) for k, v in (msg.headers or {}).items()}
        return Delivery(
            subject=msg.subject,
            stream=meta.stream,
            consumer=meta.consumer,
            stream_seq=meta.sequence.stream,
            num_delivered=meta.num_delivered,
            max_deliver=self.spec.max_deliver,
            msg_id=headers.get(api.Header.MSG_ID.value),
            published_at=meta.timestamp,
            headers=headers,
        )

    async def _handle(self, msg: Msg) -> None:
        started = time.perf_counter()
        name = self.spec.name
        outcome = "interrupted"
        delivery = self._delivery(msg)
        self._metrics.in_flight.labels(name).inc()
        keep_alive = (
            asyncio.create_task(self._keep_alive(msg)) if self.spec.in_progress_acks else None
        )
        try:
            with self._tracer.start_as_current_span(
                f"process {msg.subject}",
                context=extract_context(delivery.headers),
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "nats",
                    "messaging.destination.name": msg.subject,
                    "messaging.consumer.group.name": name,
                    "messaging.message.id": delivery.msg_id or "",
                    "messaging.nats.stream_sequence": delivery.stream_seq,
                    "messaging.nats.num_delivered": delivery.num_delivered,
                },
            ) as span:
                outcome = await self._process(msg, delivery, span)
                if outcome != "ok":
                    span.set_attribute("error.type", outcome)
        except asyncio.CancelledError:
            # stop()'s grace ran out: hand the message back now instead of after ack_wait.
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception:
            # Acking itself failed (connection lost): the server redelivers after ack_wait.
            outcome = "retry"
            log.exception("consumer %s could not settle stream seq %s", name, delivery.stream_seq)
        finally:
            if keep_alive is not None:
                keep_alive.cancel()
            self._slots.release()
            self._metrics.in_flight.labels(name).dec()
            self._metrics.messages.labels(name, outcome).inc()
            self._metrics.duration.labels(name).observe(time.perf_counter() - started)

    async def _process(self, msg: Msg, delivery: Delivery, span: trace.Span) -> str:
        """Decode, handle, settle; the outcome label."""
        spec = self.spec
        try:
            payload = spec.model.model_validate_json(msg.data)
        except ValidationError as e:
            return await self._give_up(msg, delivery, DeadLetterReason.invalid, _describe(e))
        deadline = asyncio.timeout(spec.timeout_s)
        try:
            async with deadline:
                await spec.handler(payload, delivery)
        except ContractError as e:
            if isinstance(e, PermanentError) or e.code in spec.permanent_codes:
                return await self._give_up(
                    msg, delivery, DeadLetterReason.permanent, f"{e.code}: {e.message}"
                )
            return await self._failed(msg, delivery, f"{e.code}: {e.message}", e.retry_after_s)
        except Exception as e:
            span.set_status(Status(StatusCode.ERROR, type(e).__name__))
            if isinstance(e, TimeoutError) and deadline.expired():
                detail = f"work took over {spec.timeout_s:g} s"
                log.warning(
                    "consumer %s: stream seq %s: %s", spec.name, delivery.stream_seq, detail
                )
                return await self._failed(msg, delivery, detail, None)
            log.exception(
                "consumer %s failed on stream seq %s (delivery %s of %s)",
                spec.name,
                delivery.stream_seq,
                delivery.num_delivered,
                spec.max_deliver,
            )
            return await self._failed(msg, delivery, f"{type(e).__name__}: {e}", None)
        await msg.ack()
        return "ok"

    async def _failed(
        self, msg: Msg, delivery: Delivery, detail: str, retry_after_s: float | None
    ) -> str:
        """A failed delivery: retry later, or dead-letter on the last one."""
        if delivery.last_attempt:
            return await self._give_up(msg, delivery, DeadLetterReason.exhausted, detail)
        delay = (
            retry_after_s
            if retry_after_s is not None
            else self.spec.nak_delay(delivery.num_delivered)
        )
        await msg.nak(delay=delay)
        return "retry"

    async def _give_up(
        self, msg: Msg, delivery: Delivery, reason: DeadLetterReason, detail: str
    ) -> str:
        """Store the dead letter, then terminate; if it cannot be stored, nak (nothing is lost)."""
        try:
            await write_dead_letter(
                self._js,
                stream=delivery.stream,
                consumer=delivery.consumer,
                stream_seq=delivery.stream_seq,
                subject=msg.subject,
                data=msg.data,
                headers=delivery.headers,
                reason=reason,
                detail=detail,
                deliveries=delivery.num_delivered,
            )
        except Exception:
            log.exception(
                "consumer %s: could not store the dead letter of stream seq %s; nak instead",
                self.spec.name,
                delivery.stream_seq,
            )
            await msg.nak(delay=self.spec.nak_delay(delivery.num_delivered))
            return "retry"
        log.warning(
            "consumer %s: stream seq %s dead-lettered (%s): %s",
            self.spec.name,
            delivery.stream_seq,
            reason.value,
            detail,
        )
        self._metrics.dead_letters.labels(self.spec.name, reason.value).inc()
        # +TERM with a reason (nats-server >= 2.11): the MSG_TERMINATED advisory carries it.
        await self._nc.publish(msg.reply, b"+TERM " + f"{reason.value}: {detail}".encode()[:400])
        return reason.value

    async def _keep_alive(self, msg: Msg) -> None:
        """In-progress acks while the handler works, so long work is not redelivered."""
        interval = self.spec.ack_wait_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await msg.in_progress()
            except Exception as e:
                log.debug("consumer %s: in-progress ack failed: %s", self.spec.name, e)


def dead_letter_forwarder(
    service: str, consumers: list[ConsumerSpec[Any]], js: JetStreamContext
) -> ConsumerSpec[ConsumerAdvisory]:
    """The consumer that turns the advisories of `consumers` into dead letters."""

    async def forward(advisory: ConsumerAdvisory, _: Delivery) -> None:
        await forward_advisory(js, advisory)

    subjects = tuple(s for c in consumers for s in advisory_subjects(c.stream, c.name))
    return ConsumerSpec(
        name=f"dlq-forwarder-{service}",
        stream=ADVISORY_STREAM,
        model=ConsumerAdvisory,
        handler=forward,
        filter_subjects=subjects,
        ack_wait_s=30.0,
        max_deliver=10,
        max_in_flight=4,
        description=f"dead letters of {service}'s consumers, from their advisories",
    )


class JetStreamKit:
    """The streams and consumers one service declares; started after NATS connects."""

    def __init__(self, service: str, metrics: ServiceMetrics) -> None:
        self.service = service
        # Streams this kit creates or updates (the operators' role: provisioning, tests).
        self.streams: list[StreamDecl] = []
        # Streams the service uses: checked at start, never created (issue 29 item 1).
        self.used: list[str] = []
        self.consumers: list[ConsumerSpec[Any]] = []
        self.workers: list[ConsumerWorker[Any]] = []
        self._service_metrics = metrics
        self._metrics: ConsumerMetrics | None = None
        self._stream_metrics: StreamMetrics | None = None
        self._js: JetStreamContext | None = None
        # Stream name → replicas declared: what `refresh_replicas` reads.
        self.watched: dict[str, int] = {}

    def add_stream(self, spec: StreamDecl) -> None:
        """Create or update `spec` at start: the operators' role (no service user may)."""
        self.streams.append(spec)

    def use_stream(self, name: str) -> None:
        """A stream the service uses without consuming it (it publishes there): checked at
        start, never created."""
        if name not in self.used:
            self.used.append(name)

    def watch(self, stream: str, replicas: int) -> None:
        """Export `stream`'s replica gauges too (a KV bucket's `KV_<bucket>` declared in a
        start-up hook: `ServiceRuntime.watch_stream`)."""
        self.watched[stream] = replicas
        if self._stream_metrics is not None:
            self._stream_metrics.configured.labels(stream).set(replicas)

    async def refresh_replicas(self) -> None:
        """Read each watched stream's info and set its replica gauges (a periodic task: a
        stream that cannot be read now is skipped and logged, read again at the next run)."""
        if self._js is None or self._stream_metrics is None:
            return
        for stream in list(self.watched):
            try:
                info = await self._js.stream_info(stream)
            except Exception as e:
                log.debug("stream %s: replicas not read: %s", stream, e)
                continue
            self._stream_metrics.replicas.labels(stream).set(current_replicas(info))

    async def refresh_consumers(self) -> None:
        """Read each running consumer's info and set its pending and redelivered gauges (a
        periodic task: a consumer that cannot be read now is skipped, read at the next run)."""
        if self._js is None or self._metrics is None:
            return
        for worker in list(self.workers):
            try:
                info = await self._js.consumer_info(worker.spec.stream, worker.spec.name)
            except Exception as e:
                log.debug("consumer %s: info not read: %s", worker.spec.name, e)
                continue
            self._metrics.read(worker.spec.name, info)

    def add_consumer(self, spec: ConsumerSpec[Any]) -> None:
        if any(c.name == spec.name for c in self.consumers):
            raise ValueError(f"consumer {spec.name} is declared twice")
        self.consumers.append(spec)

    async def start(self, nc: NATS, *, replicas: int = 1) -> None:
        """Check the streams used, declare the `add_stream` ones, update each consumer to its
        spec; start one worker per consumer.

        BusNotProvisioned (logged) when a stream used — `use_stream`, a consumer's, the
        dead-letter streams when there are consumers — does not exist: provisioning
        (`quiz_servicekit.provision`) has not run; nothing is created then. `replicas`:
        NATS_STREAM_REPLICAS, for the `add_stream` specs that name none (see `ensure_stream`)
        and the replica gauges' configured count.
        """
        js = self._js = nc.jetstream()
        declared = list(self.streams)
        own = {spec.name for spec in self.streams}
        used = [*self.used, *(c.stream for c in self.consumers)]
        if self.consumers:
            used += [DEAD_LETTER_STREAM, ADVISORY_STREAM]
        used = [name for name in dict.fromkeys(used) if name not in own]
        await require(js, self.service, streams=used)
        if (declared or used or self.watched) and self._stream_metrics is None:
            self._stream_metrics = StreamMetrics(self._service_metrics)
            for name, count in self.watched.items():
                self._stream_metrics.configured.labels(name).set(count)
        scaled: list[api.StreamInfo] = []
        for stream in declared:
            info, grew = await _declare_stream(js, stream, replicas)
            if grew:
                scaled.append(info)
            name = info.config.name or ""
            self.watch(name, replicas)
        for name in used:
            if name not in self.watched:
                self.watch(name, replicas)
        # The server copies a scaled-up stream to its new nodes (~10 s each, in the background)
        # and refuses consumers on it meanwhile: wait for all of them at once.
        await asyncio.gather(
            *(wait_replicated(js, i.config.name or "", i.config.num_replicas or 1) for i in scaled)
        )
        if not self.consumers:
            return
        if self._metrics is None:
            self._metrics = ConsumerMetrics(self._service_metrics)
        specs = [*self.consumers, dead_letter_forwarder(self.service, self.consumers, js)]
        tracer = trace.get_tracer(f"quiz.{self.service}")
        try:
            for spec in specs:
                worker: ConsumerWorker[Any] = ConsumerWorker(nc, spec, self._metrics, tracer=tracer)
                await worker.start()
                self.workers.append(worker)
        except BaseException:
            # A later consumer failed to declare: the service will not start, stop the others.
            await self.stop(grace_s=0)
            raise
        log.info("%s consumes: %s", self.service, ", ".join(s.name for s in specs))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop every worker in parallel (see ConsumerWorker.stop)."""
        await asyncio.gather(*(w.stop(grace_s) for w in self.workers))
        self.workers.clear()

    async def ready(self) -> bool:
        """Readiness check: every declared consumer is fetching."""
        return all(w.ready() for w in self.workers)
