"""Prometheus metrics: one registry per service instance, RED for HTTP routes and NATS endpoints.

Metrics (prefix `quiz_<service>_`):
- `http_requests_total{route,method,status}` and `http_request_duration_seconds{route,method}`
- `nats_requests_total{endpoint,outcome}` and `nats_request_duration_seconds{endpoint}`
- `nats_requests_in_flight{endpoint}`
- `nats_connected`: 1 while the service's NATS connection is up, 0 before it connects, while it
  reconnects and after it closed (read at scrape time from the client)

Counters start at 0 for every label value known at start (`zero`): a route's or endpoint's
`500`/`internal` and `ok` series exist from the first scrape, so the first failure is an
increase that `increase()` and `rate()` see (a series born at 1 reads as no increase).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

M = TypeVar("M", Counter, Gauge, Histogram)

# Seconds; dense under 100 ms because most of our edges answer in a few milliseconds.
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def zero(metric: Counter | Histogram, *values: Iterable[str]) -> None:
    """Create `metric`'s children for every combination of `values` (one iterable per label),
    at 0: exported from the first scrape, so the first event is an increase (issue 35)."""
    for combination in itertools.product(*(list(v) for v in values)):
        metric.labels(*combination)


def metric_prefix(service: str) -> str:
    """`quiz_<service>` with the dashes of the service name turned into underscores."""
    return "quiz_" + service.replace("-", "_")


class ServiceMetrics:
    """The RED metrics every service has; services add theirs on `registry` with `prefix`."""

    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.prefix = metric_prefix(service)
        p = self.prefix
        self.http_requests = Counter(
            f"{p}_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            f"{p}_http_request_duration_seconds",
            "HTTP request duration, by route template and method.",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.nats_requests = Counter(
            f"{p}_nats_requests_total",
            "NATS requests handled, by endpoint and outcome (ok or the error code).",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.nats_duration = Histogram(
            f"{p}_nats_request_duration_seconds",
            "NATS request handling duration, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.nats_in_flight = Gauge(
            f"{p}_nats_requests_in_flight",
            "NATS requests being handled now, by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.nats_connected = Gauge(
            f"{p}_nats_connected",
            "1 while the service's NATS connection is up, else 0.",
            registry=self.registry,
        )

    def watch_connection(self, connected: Callable[[], bool]) -> None:
        """`nats_connected` reads `connected()` at every scrape (the client's `is_connected`)."""
        self.nats_connected.set_function(lambda: 1.0 if connected() else 0.0)

    def known_routes(self, routes: Iterable[tuple[str, Iterable[str]]]) -> None:
        """HTTP routes (template, methods) at 0 for status 200 and 500."""
        for template, methods in routes:
            zero(self.http_requests, [template], sorted(methods), ["200", "500"])

    def known_endpoints(self, endpoints: Iterable[str]) -> None:
        """NATS endpoints at 0 for outcome ok and internal."""
        zero(self.nats_requests, list(endpoints), ["ok", "internal"])


class MetricSet:
    """Base of a service's own metrics: named `quiz_<service>_<name>`, on the service's registry.

    A service's metrics.py subclasses it, takes the runtime's `ServiceMetrics` and lists every
    metric in its docstring: `self.calls = self.counter("calls_total", "…", ["purpose"])`.
    """

    def __init__(self, base: ServiceMetrics) -> None:
        self.registry = base.registry
        self.prefix = base.prefix
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: M, *values: str) -> M:
        """`metric.labels(*values)`, looked up once per label set and then kept.

        prometheus_client's `labels()` checks, joins and locks on every call; a hot path that
        counts several labelled metrics per request pays it each time (1.9 % of llm-gateway's
        CPU per call, issue 24). The child is the one `labels()` returns, so what it counts is
        the same; label sets are bounded as the metric's own children are.
        """
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return cast(M, found)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(f"{self.prefix}_{name}", documentation, list(labels), registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(f"{self.prefix}_{name}", documentation, list(labels), registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        return Histogram(
            f"{self.prefix}_{name}",
            documentation,
            list(labels),
            buckets=buckets,
            registry=self.registry,
        )
