"""OpenTelemetry: one tracer provider per process, W3C trace context in NATS and HTTP headers."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)

_configured = False


class RecordWhenExported(Sampler):
    """Records spans only once something consumes them (an exporter or a span processor).

    Without one, every span is dropped at its start (no attributes, events or end-time work)
    but still gets a valid trace and span id, so W3C context still travels over HTTP and NATS
    and a trace id can still be logged. With one, the usual parent-based always-on sampling.
    """

    def __init__(self) -> None:
        self.recording = False
        self._inner = ParentBased(ALWAYS_ON)

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if self.recording:
            return self._inner.should_sample(
                parent_context, trace_id, name, kind, attributes, links, trace_state
            )
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "RecordWhenExported"


_sampler = RecordWhenExported()


def setup_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> None:
    """Install the process's tracer provider once; OTLP export when OTEL_* names an endpoint.

    Spans are recorded only when they go somewhere (an OTLP exporter, or `extra_processor`):
    otherwise recording them is pure CPU (4-6 % of an llm-gateway call, issue 10).
    """
    global _configured
    if _configured:
        if extra_processor is not None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, TracerProvider):
                provider.add_span_processor(extra_processor)
                _sampler.recording = True
        return
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource, sampler=_sampler)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        # Imported lazily: the exporter pulls in protobuf, which most dev runs do not need.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        _sampler.recording = True
    if extra_processor is not None:
        provider.add_span_processor(extra_processor)
        _sampler.recording = True
    trace.set_tracer_provider(provider)
    _configured = True


def spans_recorded() -> bool:
    """Whether spans are recorded (an exporter or a span processor consumes them).

    False means every span is dropped at its start: a span that carries nothing onwards (no
    header it would be injected into) need not be started at all.
    """
    return _sampler.recording


def inject_headers(headers: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Headers carrying the current trace context (traceparent, tracestate, baggage)."""
    carrier: dict[str, str] = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    """The remote parent context found in headers (a fresh root when there is none)."""
    return propagate.extract(dict(headers or {}))


def current_trace_id() -> str | None:
    """The current trace id as 32 hex digits, or None outside a span."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None
