"""Metrics of the runner.

- quiz_runner_slots (gauge): slots configured.
- quiz_runner_slots_busy (gauge): slots running a request now.
- quiz_runner_requests_total{language,outcome}: requests by outcome (ok, compile_failed, or an
  error code such as runner_busy, limit_exceeded).
- quiz_runner_request_seconds{language} (histogram): whole request, compile plus cases.
- quiz_runner_cases_total{outcome}: cases by how they ended (exit_0, exit_nonzero, signal,
  timeout_cpu, timeout_wall, memory, truncated).
- quiz_runner_sandbox_seconds{step} (histogram): one sandbox, step=compile|case.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

slots = Gauge("quiz_runner_slots", "Runner slots configured")
slots_busy = Gauge("quiz_runner_slots_busy", "Runner slots running a request now")
requests = Counter(
    "quiz_runner_requests_total", "runner.v1.run requests by outcome", ["language", "outcome"]
)
request_seconds = Histogram(
    "quiz_runner_request_seconds",
    "runner.v1.run duration, compile plus cases",
    ["language"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
cases = Counter("quiz_runner_cases_total", "Cases run, by how they ended", ["outcome"])
sandbox_seconds = Histogram(
    "quiz_runner_sandbox_seconds",
    "One sandboxed process tree, start to end",
    ["step"],
    # The per-case overhead target is tens of milliseconds: buckets around it.
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 20),
)
