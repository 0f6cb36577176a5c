"""Metrics of the runner, on the service's registry (prefix `quiz_runner_`).

- `slots`: slots configured (one request each).
- `slots_busy`: slots running a request now.
- `requests_total{language,outcome}`: requests by outcome (ok, compile_failed, or the error code:
  runner_busy, limit_exceeded, unsupported_language, invalid_request).
- `request_seconds{language}`: a whole request, compile plus every case.
- `cases_total{outcome}`: cases by how they ended (exit_0, exit_nonzero, signal, timeout_cpu,
  timeout_wall, memory, truncated).
- `sandbox_seconds{step}`: one sandbox from start to end, step=compile|case.

`requests_total` is at 0 from the start for every language with ok, runner_busy and internal
(issue 35: the first refusal is an increase).
"""

from __future__ import annotations

from quiz_contracts.runner import RunLanguage
from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero

# A sandboxed "hello" costs tens of milliseconds: buckets dense there, up to the wall maxima.
SANDBOX_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30)
REQUEST_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)


class RunnerMetrics(MetricSet):
    """Every metric of the runner."""

    def __init__(self, base: ServiceMetrics | None = None) -> None:
        super().__init__(base or ServiceMetrics("runner"))
        self.slots = self.gauge("slots", "Runner slots configured.")
        self.slots_busy = self.gauge("slots_busy", "Runner slots running a request.")
        self.requests = self.counter(
            "requests_total", "runner.v1.run requests by outcome.", ["language", "outcome"]
        )
        self.request_seconds = self.histogram(
            "request_seconds",
            "runner.v1.run duration, compile plus cases.",
            ["language"],
            buckets=REQUEST_BUCKETS,
        )
        zero(self.requests, [lang.value for lang in RunLanguage], ["ok", "runner_busy", "internal"])
        self.cases = self.counter("cases_total", "Cases run, by how they ended.", ["outcome"])
        self.sandbox_seconds = self.histogram(
            "sandbox_seconds",
            "One sandboxed process tree, start to end.",
            ["step"],
            buckets=SANDBOX_BUCKETS,
        )
