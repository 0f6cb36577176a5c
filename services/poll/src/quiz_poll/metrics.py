"""poll metrics (prefix `quiz_poll_`).

- `answers_total{outcome}`: answers received (ok, or the error code that refused them)
- `frames_total{audience}`: live frames built (one per coalesced change, per audience)
- `frames_dropped_total`: frames a slow SSE client never read (replaced by a newer one)
- `sse_clients{audience}`: SSE streams open now (wall, phone, board)
- `ai_batches_total{outcome}`: AI batches by outcome (ok, or the board's error code)
- `ai_marks_total{verdict}`: marks the model wrote (approved, hidden)
- `reloads_total`: polls re-read from the database after another replica changed them

At 0 from the start (issue 35): answers ok, AI batches ok and llm_failed, marks approved and
hidden.
"""

from __future__ import annotations

from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero


class PollMetrics(MetricSet):
    """The poll's own counters, on the service's registry."""

    def __init__(self, base: ServiceMetrics) -> None:
        super().__init__(base)
        self.answers = self.counter("answers_total", "Answers received by outcome.", ["outcome"])
        self.frames = self.counter("frames_total", "Live frames built.", ["audience"])
        self.frames_dropped = self.counter(
            "frames_dropped_total", "Frames a slow SSE client never read (a newer one replaced)."
        )
        self.sse_clients = self.gauge("sse_clients", "SSE streams open.", ["audience"])
        self.ai_batches = self.counter("ai_batches_total", "AI batches by outcome.", ["outcome"])
        self.ai_marks = self.counter("ai_marks_total", "Marks the model wrote.", ["verdict"])
        self.reloads = self.counter(
            "reloads_total", "Polls re-read after another replica changed them."
        )
        zero(self.answers, ["ok"])
        zero(self.ai_batches, ["ok", "llm_failed"])
        zero(self.ai_marks, ["approved", "hidden"])
