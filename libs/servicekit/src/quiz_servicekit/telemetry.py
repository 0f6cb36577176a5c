"""OpenTelemetry: one tracer provider per process, W3C trace context in NATS and HTTP headers."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def setup_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> None:
    """Install the process's tracer provider once; OTLP export when OTEL_* names an endpoint."""
    global _configured
    if _configured:
        if extra_processor is not None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, TracerProvider):
                provider.add_span_processor(extra_processor)
        return
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        # Imported lazily: the exporter pulls in protobuf, which most dev runs do not need.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if extra_processor is not None:
        provider.add_span_processor(extra_processor)
    trace.set_tracer_provider(provider)
    _configured = True


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
