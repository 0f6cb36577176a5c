"""review metrics (prefix `quiz_review_`).

- `reviews_total{trigger,outcome}`: model reviews by trigger (night, request, now) and outcome
  (clean, findings, failed, not_answered — the gateway unreachable or its reply lost, retried
  with the same request id —, or the gateway's code that left no row)
- `night_runs_total{outcome}`: hourly runs of the night by how they ended (outside_window,
  lease_held, done, share_spent, no_estimate, gateway_unavailable, lease_lost, rate_limited,
  llm_not_configured, llm_budget_exhausted)
- `question_events_total{kind}`: question-store events applied (published, duplicate,
  version_deleted, retired, deleted)
- `requests_total{outcome}`: review requests answered (reviewed, existing, or an error code)
- `lints_total{outcome}`: item-writing-flaw lints (NATS and HTTP) by outcome (clean, findings,
  or the refusal's code: draft_invalid, lint_unsupported, limit_exceeded)

At 0 from the start (issue 35): `reviews_total` for every trigger with clean, findings, failed
and not_answered; `night_runs_total` for every outcome; `requests_total` reviewed, existing and
internal; `lints_total` clean and findings.
"""

from __future__ import annotations

from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero

TRIGGERS = ("night", "request", "now")
REVIEW_OUTCOMES = ("clean", "findings", "failed", "not_answered")
NIGHT_OUTCOMES = (
    "outside_window",
    "lease_held",
    "done",
    "share_spent",
    "no_estimate",
    "gateway_unavailable",
    "lease_lost",
    "rate_limited",
    "llm_not_configured",
    "llm_budget_exhausted",
)


class ReviewMetrics(MetricSet):
    """The review's own counters, on the service's registry."""

    def __init__(self, base: ServiceMetrics) -> None:
        super().__init__(base)
        self.reviews = self.counter(
            "reviews_total", "Model reviews by trigger and outcome.", ["trigger", "outcome"]
        )
        self.night_runs = self.counter(
            "night_runs_total", "Hourly runs of the night by how they ended.", ["outcome"]
        )
        self.events = self.counter(
            "question_events_total", "Question-store events applied, by kind.", ["kind"]
        )
        self.requests = self.counter(
            "requests_total", "Review requests answered, by outcome.", ["outcome"]
        )
        self.lints = self.counter("lints_total", "Item-writing-flaw lints by outcome.", ["outcome"])
        zero(self.reviews, TRIGGERS, REVIEW_OUTCOMES)
        zero(self.night_runs, NIGHT_OUTCOMES)
        zero(self.requests, ["reviewed", "existing", "internal"])
        zero(self.lints, ["clean", "findings"])
