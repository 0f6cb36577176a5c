"""editor-assist metrics (prefix `quiz_editor_assist_`).

- `generate_total{type,outcome}`: wand calls by question type and outcome (ok or the error code)
- `generate_incomplete_total{type,code}`: merged drafts returned with something left to do
- `settle_runs_total{type,outcome}`: runner calls made by settle (ok or the error code)
- `proposal_lints_total{outcome}`: lints of the proposed mcq (`review.v1.lint`): ok, or the
  code that left it without findings (unavailable, timeout, draft_invalid…)
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
        self.proposal_lints = self.counter(
            "proposal_lints_total",
            "Lints of the proposed mcq through review.v1.lint, by outcome.",
            ["outcome"],
        )
