"""The Grafana dashboard and the Prometheus alert rules (deploy/monitoring): current, valid,
and querying only metrics that the services export."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

from quiz_testkit.system import promtool

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
# Every service's RED metrics (quiz_servicekit.metrics) and JetStream consumer metrics
# (quiz_servicekit.jetstream), after `quiz_<service>_`.
KIT_METRICS = {
    "http_requests_total",
    "http_request_duration_seconds",
    "nats_requests_total",
    "nats_request_duration_seconds",
    "nats_requests_in_flight",
    "consumer_messages_total",
    "consumer_message_duration_seconds",
    "consumer_messages_in_flight",
    "consumer_max_in_flight",
    "dead_letters_total",
    "stream_replicas",
    "stream_replicas_configured",
}


def exported() -> set[str]:
    names = set()
    for pyproject in (ROOT / "services").glob("*/pyproject.toml"):
        prefix = "quiz_" + pyproject.parent.name.replace("-", "_")
        names |= {f"{prefix}_{m}" for m in KIT_METRICS}
        for metrics in pyproject.parent.glob("src/*/metrics.py"):
            for m in re.findall(r'"([a-z][a-z0-9_]*)",\s*\n?\s*"', metrics.read_text()):
                names.add(f"{prefix}_{m}")
    return names


def queried(text: str) -> set[str]:
    found = set(re.findall(r"\bquiz_[a-z0-9_]*[a-z0-9]\b", text))
    return {
        re.sub(r"_(bucket|sum|count)$", "", n)
        for n in found
        if not n.endswith("_") and n != "quiz_servicekit"  # the module, named in a description
    }


def test_the_dashboard_is_current_and_queries_exported_metrics() -> None:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_dashboard.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    path = MONITORING / "grafana-dashboard.json"
    assert path.read_text() == gen.render(), "run scripts/gen_dashboard.py"
    board = json.loads(path.read_text())
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for topic in ("red per service", "cap", "reservations", "slots", "busy", "poll", "night"):
        assert topic in titles, topic
    unknown = queried(path.read_text()) - exported()
    assert not unknown, f"the dashboard queries metrics nobody exports: {sorted(unknown)}"


def test_alert_rules_pass_promtool_and_query_exported_metrics() -> None:
    rules = MONITORING / "alerts.yaml"
    unknown = queried(rules.read_text()) - exported()
    assert not unknown, f"rules on metrics nobody exports: {sorted(unknown)}"
    names = set(re.findall(r"alert: (\w+)", rules.read_text()))
    for wanted in (
        "QuizLlmCapNearlySpent",
        "QuizLlmCircuitOpen",
        "QuizRunnerSaturated",
        "QuizReviewNightStoppedByShare",
        "QuizReviewNightStoppedByError",
        "QuizPollBatchesFailing",
        "QuizDeadLettersPresent",
        "QuizInternalErrors",
        "QuizLlmSettleJournalNotDraining",
        "QuizConsumerStuck",
        "QuizStreamBelowReplicas",
    ):
        assert wanted in names
    tool = promtool()
    if tool is None:
        pytest.skip("promtool is not installed (scripts/ensure-test-tools.sh installs it)")
    result = subprocess.run(
        [tool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_explained_in_operations() -> None:
    ops = (ROOT / "docs" / "operations.md").read_text()
    for name in re.findall(r"alert: (\w+)", (MONITORING / "alerts.yaml").read_text()):
        assert f"`{name}`" in ops, f"docs/operations.md does not say what {name} means"


def test_the_cluster_alerts_fire_on_their_faults_and_stay_quiet_otherwise() -> None:
    """promtool's unit tests of the rules (deploy/monitoring/alerts-test.yaml): a stream below
    its replicas, internal answers, a settle journal that does not drain, a consumer stuck at
    its in-flight limit and one saturated, each against a healthy twin."""
    tool = promtool()
    if tool is None:
        pytest.skip("promtool is not installed (scripts/ensure-test-tools.sh installs it)")
    result = subprocess.run(
        [tool, "test", "rules", str(MONITORING / "alerts-test.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
