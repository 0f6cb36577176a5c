"""The Grafana dashboard and the Prometheus alert rules (deploy/monitoring): current, valid,
and querying only metrics that the services export."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from quiz_servicekit.jetstream import ConsumerMetrics, StreamMetrics
from quiz_servicekit.metrics import MetricSet, ServiceMetrics
from quiz_servicekit.periodic import PeriodicMetrics
from quiz_testkit.prometheus import families, uncovered
from quiz_testkit.system import promtool

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
# The services' metric prefixes: `quiz_<service>_` (quiz_servicekit.metrics.metric_prefix).
PREFIXES = [
    "quiz_" + p.parent.name.replace("-", "_") + "_"
    for p in sorted((ROOT / "services").glob("*/pyproject.toml"))
]


def exported() -> set[str]:
    """Every family the services declare: each service's metric classes (its metrics.py) and
    the kit's (RED, consumers, streams, periodic tasks) built on one registry per service."""
    names: set[str] = set()
    for pyproject in sorted((ROOT / "services").glob("*/pyproject.toml")):
        service = pyproject.parent.name
        base = ServiceMetrics(service)
        ConsumerMetrics(base)
        StreamMetrics(base)
        PeriodicMetrics(base)
        for path in pyproject.parent.glob("src/*/metrics.py"):
            module = importlib.import_module(f"{path.parent.name}.metrics")
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, MetricSet)
                    and value is not MetricSet
                    and value.__module__ == module.__name__
                ):
                    value(base)
        names |= families(generate_latest(base.registry).decode())
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
    for topic in (
        "red per service",
        "cap",
        "reservations",
        "slots",
        "busy",
        "poll",
        "night",
        "up per service",
        "nats connection",
        "pending",
    ):
        assert topic in titles, topic
    unknown = queried(path.read_text()) - exported()
    assert not unknown, f"the dashboard queries metrics nobody exports: {sorted(unknown)}"


def test_alert_rules_pass_promtool_and_query_exported_metrics() -> None:
    rules = MONITORING / "alerts.yaml"
    unknown = queried(rules.read_text()) - exported()
    assert not unknown, f"rules on metrics nobody exports: {sorted(unknown)}"
    names = set(re.findall(r"alert: (\w+)", rules.read_text()))
    # Issue 35's fault classes, each with its alert.
    for wanted in (
        "QuizLlmProviderDown",
        "QuizLlmProviderErrors",
        "QuizBusDisconnected",
        "QuizConsumerBacklog",
        "QuizConsumerRedeliveries",
        "QuizServiceDown",
        "QuizServiceAbsent",
        "QuizRunnerBusy",
        "QuizRunnerSaturated",
        "QuizLlmCallsRefused",
        "QuizHttpSlow",
        "QuizNatsSlow",
        "QuizDeadLetters",
        "QuizInternalErrors",
        "QuizWandIncomplete",
        "QuizReviewFailed",
        "QuizLlmCapNearlySpent",
        "QuizLlmCapSpent",
        "QuizLlmSettleJournalNotDraining",
        "QuizStreamBelowReplicas",
        "QuizConsumerStuck",
        "QuizReviewNightStoppedByShare",
        "QuizReviewNightStoppedByError",
        "QuizPollBatchesFailing",
    ):
        assert wanted in names, wanted
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


def alert_rules() -> list[dict[str, str]]:
    """Each alert of alerts.yaml: its name and expression (the file read as text: no YAML
    library in the workspace; the layout is `- alert:` then `expr:`, checked here)."""
    text = (MONITORING / "alerts.yaml").read_text()
    rules = []
    for block in re.split(r"\n      - (?=alert:|record:)", text)[1:]:
        head = block.split("\n", 1)[0]
        if not head.startswith("alert:"):
            continue
        expr = re.search(r"expr: (?:\|\n)?(.*?)\n        (?:for|labels):", block, re.S)
        assert expr, block
        rules.append({"alert": head.split(":", 1)[1].strip(), "expr": expr.group(1)})
    return rules


def test_the_dashboard_shows_every_alerts_metric() -> None:
    """Issue 35: each alert's metric on a panel (by name, by the `quiz:` record, or by the
    same `__name__` matcher), so the operator paged sees the line that crossed."""
    board = (MONITORING / "grafana-dashboard.json").read_text()
    rules = alert_rules()
    assert len(rules) == len(re.findall(r"alert: (\w+)", (MONITORING / "alerts.yaml").read_text()))
    for rule in rules:
        names = set(re.findall(r"\b(quiz_[a-z0-9_]*[a-z0-9]|quiz:[a-z_]+)\b", rule["expr"]))
        matchers = set(re.findall(r'__name__=~"([^"]+)"', rule["expr"]))
        # A service's family is on the board by its `quiz:` record too.
        records = {
            n
            for n in names
            for prefix in PREFIXES
            if n.startswith(prefix) and "quiz:" + n.removeprefix(prefix) in board
        }
        missing = {n for n in names if n not in board} - records | {
            m for m in matchers if f'__name__=~\\"{m}\\"' not in board
        }
        assert not missing, f"{rule['alert']}: not on the dashboard: {sorted(missing)}"


def test_every_exported_family_is_on_a_rule_or_a_panel() -> None:
    """From the services' sources (the running services' /metrics: tests/e2e/
    test_alerts_fire.py)."""
    left = uncovered(
        exported(),
        (MONITORING / "alerts.yaml").read_text(),
        (MONITORING / "grafana-dashboard.json").read_text(),
    )
    assert not left, f"exported, on no rule and no panel: {sorted(left)}"


def test_the_compose_scrape_config_is_valid_and_scrapes_every_service() -> None:
    """deploy/monitoring/prometheus.yml: the compose stack's six services, its rules the same
    alerts.yaml (promtool check config checks the rule file it names too)."""
    config = (MONITORING / "prometheus.yml").read_text()
    compose = (ROOT / "docker-compose.yml").read_text()
    ports = re.findall(r'HTTP_PORT: "(\d+)"', compose)
    assert len(ports) == 6
    assert sorted(re.findall(r"- 127\.0\.0\.1:(\d+)", config)) == sorted(ports)
    tool = promtool()
    if tool is None:
        pytest.skip("promtool is not installed (scripts/ensure-test-tools.sh installs it)")
    result = subprocess.run(
        [tool, "check", "config", str(MONITORING / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_fired_by_a_test() -> None:
    """Each alert fires in promtool's unit tests (alerts-test.yaml) or on a real Prometheus
    against the running system (tests/e2e/test_alerts_fire.py)."""
    names = set(re.findall(r"alert: (\w+)", (MONITORING / "alerts.yaml").read_text()))
    unit = set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts-test.yaml").read_text()))
    e2e_text = (ROOT / "tests" / "e2e" / "test_alerts_fire.py").read_text()
    e2e = set(re.findall(r'"(Quiz\w+)"', e2e_text))
    assert names - unit - e2e == set()
