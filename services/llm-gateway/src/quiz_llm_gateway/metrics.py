"""Metrics of the gateway, on the service's registry (prefix `quiz_llm_gateway_`).

- `calls_total{purpose,model,outcome}`: calls answered (ok or the error code).
- `cost_usd_total{purpose,model}`: real spend settled, in USD.
- `tokens_total{purpose,model,direction}`: input and output tokens settled.
- `cache_tokens_total{model,kind}`: of the input tokens, those read from (`read`) or written
  to (`write`) the provider's prompt cache (issue 31).
- `call_duration_seconds{purpose}`: a call from admission to reply, retries included.
- `provider_requests_total{model,status}`: HTTP requests to the provider (ok, 429, 529, timeout…).
- `parse_failures_total{purpose}`: unreadable replies (schema or empty), each one asked again once.
- `budget_remaining_usd`, `budget_spent_usd`, `budget_reserved_usd`: today's budget row.
- `reservations_open`: holds not yet settled (all replicas).
- `circuit_state`: 0 closed, 1 half-open, 2 open (this replica).
- `provider_in_flight`: provider requests in flight (this replica).
- `journal_rejected_total{reason}`: JetStream journal entries replay refused, not applied
  (issue 29): `unsigned`, `bad_mac` (not written by a gateway holding the journal key) or
  `invalid` (unreadable, or a negative cost). Above 0: someone writes on the journal.
- `settle_journal_pending`: journal entries (settles, paid replies) not yet in the database:
  this database's in the JetStream journal (the same figure on every replica: take the `max`
  across replicas, not the sum) plus this replica's journal files and memory. Refreshed every
  sweep; above 0 for longer than an outage lasts means the journal does not drain.

`known(models)` puts the counters at 0 for every purpose and its model (issue 35): calls with
every outcome an alert reads (ok, internal, llm_failed, llm_budget_exhausted, rate_limited,
unavailable), provider requests ok, parse failures.
"""

from __future__ import annotations

from collections.abc import Mapping

from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero

# Seconds, with buckets at the targets: a few ms of our own, seconds for a model's answer.
CALL_BUCKETS = (0.002, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
CALL_OUTCOMES = (
    "ok",
    "internal",
    "llm_failed",
    "llm_budget_exhausted",
    "rate_limited",
    "unavailable",
)


class GatewayMetrics(MetricSet):
    """Every metric of the gateway."""

    def __init__(self, base: ServiceMetrics) -> None:
        super().__init__(base)
        self.calls = self.counter(
            "calls_total", "LLM calls answered.", ["purpose", "model", "outcome"]
        )
        self.cost = self.counter("cost_usd_total", "Settled spend in USD.", ["purpose", "model"])
        self.tokens = self.counter(
            "tokens_total", "Settled tokens.", ["purpose", "model", "direction"]
        )
        self.cache_tokens = self.counter(
            "cache_tokens_total",
            "Prompt-cache input tokens settled: read (0.1x) or written (1.25x the input price).",
            ["model", "kind"],
        )
        self.duration = self.histogram(
            "call_duration_seconds",
            "Call duration, retries included.",
            ["purpose"],
            buckets=CALL_BUCKETS,
        )
        self.provider_requests = self.counter(
            "provider_requests_total", "Provider HTTP requests.", ["model", "status"]
        )
        self.parse_failures = self.counter(
            "parse_failures_total", "Unreadable model replies.", ["purpose"]
        )
        self.budget_remaining = self.gauge(
            "budget_remaining_usd", "Today's cap minus spend and holds."
        )
        self.budget_spent = self.gauge("budget_spent_usd", "Today's spend.")
        self.budget_reserved = self.gauge("budget_reserved_usd", "Today's open holds.")
        self.reservations_open = self.gauge("reservations_open", "Holds not yet settled.")
        self.circuit_state = self.gauge("circuit_state", "0 closed, 1 half-open, 2 open.")
        self.provider_in_flight = self.gauge("provider_in_flight", "Provider requests in flight.")
        self.journal_rejected = self.counter(
            "journal_rejected_total",
            "Journal entries refused on replay (not the gateway's, or invalid).",
            ["reason"],
        )
        for reason in ("unsigned", "bad_mac", "invalid"):
            self.journal_rejected.labels(reason)  # exported at 0
        self.journal_pending = self.gauge(
            "settle_journal_pending",
            "Settles and paid replies in the journal, not yet in the database.",
        )

    def known(self, models: Mapping[str, str]) -> None:
        """The counters at 0 for every purpose → model of the configuration."""
        for purpose, model in models.items():
            zero(self.calls, [purpose], [model], CALL_OUTCOMES)
            zero(self.provider_requests, [model], ["ok"])
            zero(self.parse_failures, [purpose])
            zero(self.cache_tokens, [model], ["read", "write"])
