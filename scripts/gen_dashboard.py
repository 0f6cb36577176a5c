"""Write the Grafana dashboard of the platform: deploy/monitoring/grafana-dashboard.json.

    uv run --no-sync python scripts/gen_dashboard.py

Generated (not hand-edited) so its queries stay consistent; tests/deploy/test_monitoring.py
checks that the file is current and that every metric it queries is one a service exports.
Import it in Grafana (Dashboards → Import) and pick the Prometheus data source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "monitoring" / "grafana-dashboard.json"
SERVICES = ("llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix")
DS = {"type": "prometheus", "uid": "${datasource}"}


def _panel(
    title: str, targets: list[tuple[str, str]], *, unit: str = "short", kind: str = "timeseries"
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": DS,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(65 + i), "expr": expr, "legendFormat": legend, "datasource": DS}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def panels() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [_row("RED per service (HTTP and NATS)")]
    for svc in SERVICES:
        p = "quiz_" + svc.replace("-", "_")
        out.append(
            _panel(
                f"{svc}: requests/s and errors/s",
                [
                    (f"sum(rate({p}_http_requests_total[5m]))", "http"),
                    (f'sum(rate({p}_http_requests_total{{status=~"5.."}}[5m]))', "http 5xx"),
                    (f"sum(rate({p}_nats_requests_total[5m]))", "nats"),
                    (
                        f'sum(rate({p}_nats_requests_total{{outcome!="ok"}}[5m]))',
                        "nats errors",
                    ),
                ],
                unit="reqps",
            )
        )
        out.append(
            _panel(
                f"{svc}: p95 duration",
                [
                    (
                        "histogram_quantile(0.95, sum by (le, route) "
                        f"(rate({p}_http_request_duration_seconds_bucket[5m])))",
                        "{{route}}",
                    ),
                    (
                        "histogram_quantile(0.95, sum by (le, endpoint) "
                        f"(rate({p}_nats_request_duration_seconds_bucket[5m])))",
                        "{{endpoint}}",
                    ),
                ],
                unit="s",
            )
        )
    g = "quiz_llm_gateway"
    cap = f"max({g}_budget_spent_usd + {g}_budget_reserved_usd + {g}_budget_remaining_usd)"
    out += [
        _row("LLM spend and cap"),
        _panel(
            "Spend today by purpose vs the daily cap",
            [
                (f"sum by (purpose) (increase({g}_cost_usd_total[24h]))", "{{purpose}} (24 h)"),
                (f"max({g}_budget_spent_usd)", "spent today"),
                (cap, "daily cap"),
            ],
            unit="currencyUSD",
        ),
        _panel(
            "Cap left",
            [(f"max({g}_budget_remaining_usd) / {cap}", "left")],
            unit="percentunit",
            kind="gauge",
        ),
        _panel(
            "Reservations open and provider calls in flight",
            [
                (f"max({g}_reservations_open)", "reservations open"),
                (f"sum({g}_provider_in_flight)", "provider in flight"),
            ],
        ),
        _panel(
            "Calls by purpose and outcome",
            [(f"sum by (purpose, outcome) (rate({g}_calls_total[5m]))", "{{purpose}} {{outcome}}")],
            unit="reqps",
        ),
        _panel(
            "Circuit state per replica (0 closed, 1 half-open, 2 open)",
            [(f"max by (instance) ({g}_circuit_state)", "{{instance}}")],
        ),
        _row("Runner"),
        _panel(
            "Slots and busy slots",
            [("sum(quiz_runner_slots)", "slots"), ("sum(quiz_runner_slots_busy)", "busy")],
        ),
        _panel(
            "Busy rate",
            [("sum(quiz_runner_slots_busy) / clamp_min(sum(quiz_runner_slots), 1)", "busy")],
            unit="percentunit",
        ),
        _panel(
            "Runs by language and outcome",
            [
                (
                    "sum by (language, outcome) (rate(quiz_runner_requests_total[5m]))",
                    "{{language}} {{outcome}}",
                )
            ],
            unit="reqps",
        ),
        _row("Poll"),
        _panel(
            "Live frames built by audience, and frames dropped (slow SSE clients)",
            [
                ("sum by (audience) (rate(quiz_poll_frames_total[5m]))", "{{audience}}"),
                ("sum(rate(quiz_poll_frames_dropped_total[5m]))", "dropped"),
                ("sum by (audience) (quiz_poll_sse_clients)", "SSE clients {{audience}}"),
            ],
            unit="short",
        ),
        _panel(
            "AI batches and answers by outcome",
            [
                ("sum by (outcome) (rate(quiz_poll_ai_batches_total[5m]))", "batch {{outcome}}"),
                ("sum by (outcome) (rate(quiz_poll_answers_total[5m]))", "answer {{outcome}}"),
                (
                    'sum by (outcome) (rate(quiz_llm_gateway_calls_total{purpose="poll"}[5m]))',
                    "model calls {{outcome}}",
                ),
            ],
            unit="reqps",
        ),
        _row("Review night"),
        _panel(
            "Night runs by how they ended",
            [
                (
                    "sum by (outcome) (increase(quiz_review_night_runs_total[1h]))",
                    "{{outcome}}",
                )
            ],
        ),
        _panel(
            "Reviews by trigger and outcome",
            [
                (
                    "sum by (trigger, outcome) (increase(quiz_review_reviews_total[1h]))",
                    "{{trigger}} {{outcome}}",
                )
            ],
        ),
        _panel(
            "Review's share of the cap used (24 h)",
            [(f'sum(increase({g}_cost_usd_total{{purpose="review"}}[24h])) / {cap}', "used")],
            unit="percentunit",
        ),
        _row("JetStream work and dead letters"),
        _panel(
            "Consumer messages by service, consumer and outcome",
            [
                (
                    "sum by (__name__, consumer, outcome) "
                    '(rate({__name__=~"quiz_.+_consumer_messages_total"}[5m]))',
                    "{{__name__}} {{consumer}} {{outcome}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Consumer slots in flight vs the limit (per replica)",
            [
                (
                    "max by (__name__, consumer, instance) "
                    '({__name__=~"quiz_.+_consumer_messages_in_flight"})',
                    "{{__name__}} {{consumer}} {{instance}}",
                ),
                (
                    'max by (consumer) ({__name__=~"quiz_.+_consumer_max_in_flight"})',
                    "limit {{consumer}}",
                ),
            ],
        ),
        _panel(
            "Stream replicas: current vs declared",
            [
                (
                    'min by (stream) ({__name__=~"quiz_.+_stream_replicas"})',
                    "current {{stream}}",
                ),
                (
                    'max by (stream) ({__name__=~"quiz_.+_stream_replicas_configured"})',
                    "declared {{stream}}",
                ),
            ],
        ),
        _panel(
            "Internal answers and the unwritten settle journal",
            [
                (
                    "sum by (__name__) "
                    '(increase({__name__=~"quiz_.+_nats_requests_total", outcome="internal"}[1h]))',
                    "NATS internal (1 h) {{__name__}}",
                ),
                ("max(quiz_llm_gateway_settle_journal_pending)", "settles not in the ledger"),
            ],
        ),
        _panel(
            "Dead letters written (1 h)",
            [
                (
                    "sum by (consumer, reason) "
                    '(increase({__name__=~"quiz_.+_dead_letters_total"}[1h]))',
                    "{{consumer}} {{reason}}",
                )
            ],
        ),
    ]
    # Layout: rows full width, panels two per line.
    y = 0
    x = 0
    for i, panel in enumerate(out):
        panel["id"] = i + 1
        if panel["type"] == "row":
            if x:
                y += 8
            panel["gridPos"] = {"x": 0, "y": y, "w": 24, "h": 1}
            y += 1
            x = 0
            continue
        panel["gridPos"] = {"x": x, "y": y, "w": 12, "h": 8}
        x += 12
        if x >= 24:
            x = 0
            y += 8
    return out


def dashboard() -> dict[str, Any]:
    return {
        "uid": "quiz-platform",
        "title": "Quiz platform: LLM assistance services",
        "tags": ["quiz"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                }
            ]
        },
        "panels": panels(),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render())
    print(f"wrote {OUT.relative_to(ROOT)}")
    sys.exit(0)
