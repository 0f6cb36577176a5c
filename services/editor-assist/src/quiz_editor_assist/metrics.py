"""editor-assist metrics (prefix `quiz_editor_assist_`).

- `generate_total{type,outcome}`: wand calls by question type and outcome (ok or the error code)
- `generate_incomplete_total{type,code}`: merged drafts returned with something left to do
- `settle_runs_total{type,outcome}`: settle's runs: ok (the runner ran it), replayed (the run
  kept with the gateway's stored reply: nothing ran), or the error code
- `proposal_lints_total{outcome}`: lints of the proposed mcq (`review.v1.lint`): ok, or the
  code that left it without findings (unavailable, timeout, draft_invalid…)

At 0 from the start for every question type (issue 35): `generate_total` with ok and internal,
`generate_incomplete_total` with every code a draft can be left with, `settle_runs_total` with
ok, replayed, runner_busy and runner_unavailable; `proposal_lints_total` with ok.
"""

from __future__ import annotations

from quiz_contracts.questions import QUESTION_TYPES
from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero

# Generate.incomplete[].code (quiz_contracts.generate.Incomplete).
INCOMPLETE_CODES = ("draft_invalid", "runner_unavailable", "compile_failed", "partial")


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
            "Settle's runs by type and outcome (replayed: kept with the stored reply, nothing"
            " ran).",
            ["type", "outcome"],
        )
        self.proposal_lints = self.counter(
            "proposal_lints_total",
            "Lints of the proposed mcq through review.v1.lint, by outcome.",
            ["outcome"],
        )
        types = sorted(QUESTION_TYPES)
        zero(self.generate, types, ["ok", "internal"])
        zero(self.incomplete, types, INCOMPLETE_CODES)
        zero(self.settle_runs, types, ["ok", "replayed", "runner_busy", "runner_unavailable"])
        zero(self.proposal_lints, ["ok"])
