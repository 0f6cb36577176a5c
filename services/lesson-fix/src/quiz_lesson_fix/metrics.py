"""lesson-fix metrics (prefix `quiz_lesson_fix_`).

- `fixes_total{outcome}`: fix requests by outcome (ok, or the error code that ended them)
- `fix_passed_total{attempt}`: fixes that passed checkFix, by the try that passed (1 or 2)
- `verifications_total{outcome}`: human verifications (ok, verification_failed,
  verification_unavailable, disabled)
- `check_duration_seconds`: full lesson checks of one lesson (the request's one pass, and checkFix's
  pass on each try), in a worker thread; the target is 0.1 s on a 300,000-character lesson

At 0 from the start (issue 35): fixes ok, fix_failed and internal; passes on try 1 and 2.
"""

from __future__ import annotations

from quiz_servicekit.metrics import MetricSet, ServiceMetrics, zero

CHECK_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LessonFixMetrics(MetricSet):
    """The fix's own counters, on the service's registry."""

    def __init__(self, base: ServiceMetrics) -> None:
        super().__init__(base)
        self.fixes = self.counter("fixes_total", "Fix requests by outcome.", ["outcome"])
        self.passed = self.counter(
            "fix_passed_total", "Fixes that passed checkFix, by the try that passed.", ["attempt"]
        )
        self.verifications = self.counter(
            "verifications_total", "Human verifications by outcome.", ["outcome"]
        )
        zero(self.fixes, ["ok", "fix_failed", "internal"])
        zero(self.passed, ["1", "2"])
        self.check_seconds = self.histogram(
            "check_duration_seconds", "Full lesson checks of one lesson.", buckets=CHECK_BUCKETS
        )
