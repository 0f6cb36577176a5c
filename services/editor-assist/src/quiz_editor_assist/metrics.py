"""editor-assist metrics (prefix `quiz_editor_assist_`).

- `generate_total{type,outcome}`: wand calls by question type and outcome (ok or the error code)
- `generate_incomplete_total{type,code}`: merged drafts returned with something left to do
- `settle_runs_total{type,outcome}`: runner calls made by settle (ok or the error code)
"""

from __future__ import annotations

from prometheus_client import Counter

from quiz_servicekit.metrics import ServiceMetrics


class EditorAssistMetrics:
    """The wand's own counters, on the service's registry."""

    def __init__(self, base: ServiceMetrics) -> None:
        p, r = base.prefix, base.registry
        self.generate = Counter(
            f"{p}_generate_total",
            "Wand calls by type and outcome.",
            ["type", "outcome"],
            registry=r,
        )
        self.incomplete = Counter(
            f"{p}_generate_incomplete_total",
            "Merged drafts returned with something left to do, by type and reason.",
            ["type", "code"],
            registry=r,
        )
        self.settle_runs = Counter(
            f"{p}_settle_runs_total",
            "Runner calls made by settle, by type and outcome.",
            ["type", "outcome"],
            registry=r,
        )
