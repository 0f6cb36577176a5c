"""Metrics of the gateway, on the service's registry (prefix `quiz_llm_gateway_`).

- `calls_total{purpose,model,outcome}`: calls answered (ok or the error code).
- `cost_usd_total{purpose,model}`: real spend settled, in USD.
- `tokens_total{purpose,model,direction}`: input and output tokens settled.
- `call_duration_seconds{purpose}`: a call from admission to reply, retries included.
- `provider_requests_total{model,status}`: HTTP requests to the provider (ok, 429, 529, timeout…).
- `parse_failures_total{purpose}`: unreadable replies (schema or empty), each one asked again once.
- `budget_remaining_usd`, `budget_spent_usd`, `budget_reserved_usd`: today's budget row.
- `reservations_open`: holds not yet settled (all replicas).
- `circuit_state`: 0 closed, 1 half-open, 2 open (this replica).
- `provider_in_flight`: provider requests in flight (this replica).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Seconds, with buckets at the targets: a few ms of our own, seconds for a model's answer.
CALL_BUCKETS = (0.002, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)


class GatewayMetrics:
    """Every metric of the gateway."""

    def __init__(self, registry: CollectorRegistry, prefix: str = "quiz_llm_gateway") -> None:
        p = prefix
        self.calls = Counter(
            f"{p}_calls_total",
            "LLM calls answered.",
            ["purpose", "model", "outcome"],
            registry=registry,
        )
        self.cost = Counter(
            f"{p}_cost_usd_total", "Settled spend in USD.", ["purpose", "model"], registry=registry
        )
        self.tokens = Counter(
            f"{p}_tokens_total",
            "Settled tokens.",
            ["purpose", "model", "direction"],
            registry=registry,
        )
        self.duration = Histogram(
            f"{p}_call_duration_seconds",
            "Call duration, retries included.",
            ["purpose"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.provider_requests = Counter(
            f"{p}_provider_requests_total",
            "Provider HTTP requests.",
            ["model", "status"],
            registry=registry,
        )
        self.parse_failures = Counter(
            f"{p}_parse_failures_total",
            "Unreadable model replies.",
            ["purpose"],
            registry=registry,
        )
        self.budget_remaining = Gauge(
            f"{p}_budget_remaining_usd", "Today's cap minus spend and holds.", registry=registry
        )
        self.budget_spent = Gauge(f"{p}_budget_spent_usd", "Today's spend.", registry=registry)
        self.budget_reserved = Gauge(
            f"{p}_budget_reserved_usd", "Today's open holds.", registry=registry
        )
        self.reservations_open = Gauge(
            f"{p}_reservations_open", "Holds not yet settled.", registry=registry
        )
        self.circuit_state = Gauge(
            f"{p}_circuit_state", "0 closed, 1 half-open, 2 open.", registry=registry
        )
        self.provider_in_flight = Gauge(
            f"{p}_provider_in_flight", "Provider requests in flight.", registry=registry
        )
