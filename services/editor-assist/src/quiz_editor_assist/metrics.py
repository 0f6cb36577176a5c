"""editor-assist metrics (prefix `quiz_editor_assist_`).

- `generate_total{type,outcome}`: wand calls by question type and outcome (ok or the error code)
- `generate_incomplete_total{type,code}`: merged drafts returned with something left to do
- `settle_runs_total{type,outcome}`: settle's runs: ok (the runner ran it), replayed (the run
  kept with the gateway's stored reply: nothing ran), or the error code
"""

from __future__ import annotations

from quiz_servicekit.metrics import MetricSet, ServiceMetrics


class EditorAssistMetrics(MetricSet):
    """The wand's own counters, on the service's registry."""

    def __init__(self, base: ServiceMetrics) -> None:
        super().__init__(base)
        self.generate = self.counter(
            "generate_total", "Wand calls by type and outcome.", ["type", "outcome"]
        )
        self.incomplete = self.counter(
            "generate_incomplete_total",
            "Merged drafts returned with something left to do, by type and reason.",
            ["type", "code"],
        )
        self.settle_runs = self.counter(
            "settle_runs_total",
            "Runner calls made by settle, by type and outcome.",
            ["type", "outcome"],
        )
