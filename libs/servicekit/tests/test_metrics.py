"""MetricSet.child: a labelled metric's child looked up once, counting into the same series."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from quiz_servicekit.metrics import MetricSet, ServiceMetrics


def test_child_is_the_labelled_series_kept_per_label_set() -> None:
    registry = CollectorRegistry()
    metrics = MetricSet(ServiceMetrics("demo", registry))
    calls = metrics.counter("calls_total", "Calls.", ["purpose", "outcome"])
    other = metrics.counter("other_total", "Other.", ["purpose", "outcome"])
    ok = metrics.child(calls, "review", "ok")
    assert metrics.child(calls, "review", "ok") is ok
    assert ok is calls.labels("review", "ok")
    ok.inc()
    metrics.child(calls, "review", "ok").inc(2)
    metrics.child(calls, "review", "llm_failed").inc()
    metrics.child(other, "review", "ok").inc(5)  # another metric, same labels: its own child
    value = registry.get_sample_value
    assert value("quiz_demo_calls_total", {"purpose": "review", "outcome": "ok"}) == 3
    assert value("quiz_demo_calls_total", {"purpose": "review", "outcome": "llm_failed"}) == 1
    assert value("quiz_demo_other_total", {"purpose": "review", "outcome": "ok"}) == 5
