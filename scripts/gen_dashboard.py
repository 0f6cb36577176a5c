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


def _p95(metric: str, by: str) -> str:
    return f"histogram_quantile(0.95, sum by (le, {by}) (rate({metric}_bucket[5m])))"


def health() -> list[dict[str, Any]]:
    """The first row: what fires, which targets answer, the bus, the consumers' backlog (the
    `quiz:` series are the records of deploy/monitoring/alerts.yaml, labelled by service)."""
    return [
        _row("Health: alerts firing, targets up, the bus, JetStream backlog"),
        _panel(
            "Alerts firing",
            [('sum by (alertname, severity) (ALERTS{alertstate="firing"})', "{{alertname}}")],
        ),
        _panel(
            "up per service (1: the target answers its scrape; QuizServiceDown)",
            [
                (
                    "up + on (job, instance) group_left (service) "
                    "(0 * max by (job, instance, service) "
                    "(max_over_time(quiz:nats_connected[1h])))",
                    "{{service}} {{instance}}",
                )
            ],
        ),
        _panel(
            "NATS connection per service (1 connected; QuizBusDisconnected)",
            [("quiz:nats_connected", "{{service}} {{instance}}")],
        ),
        _panel(
            "Consumers: pending, delivered not acked, redelivered (QuizConsumerBacklog)",
            [
                ("quiz:consumer_pending", "pending {{service}} {{consumer}}"),
                (
                    'max by (__name__, consumer) ({__name__=~"quiz_.+_consumer_ack_pending"})',
                    "ack pending {{__name__}} {{consumer}}",
                ),
                ("quiz:consumer_redelivered", "redelivered {{service}} {{consumer}}"),
            ],
        ),
        _panel(
            "Internal answers (10 min; QuizInternalErrors)",
            [
                (
                    "sum by (service, endpoint) "
                    '(increase(quiz:nats_requests_total{outcome="internal"}[10m]))',
                    "{{service}} {{endpoint}}",
                ),
                (
                    "sum by (service, route) "
                    '(increase(quiz:http_requests_total{status="500"}[10m]))',
                    "{{service}} {{route}}",
                ),
                (
                    "sum by (purpose) "
                    '(increase(quiz_llm_gateway_calls_total{outcome="internal"}[10m]))',
                    "llm call {{purpose}}",
                ),
            ],
        ),
        _panel(
            "Dead letters (10 min; QuizDeadLetters)",
            [
                (
                    "sum by (service, consumer, reason) (increase(quiz:dead_letters_total[10m]))",
                    "{{service}} {{consumer}} {{reason}}",
                )
            ],
        ),
        _panel(
            "p95 per route and per NATS endpoint, every service"
            " (QuizHttpSlow, QuizNatsSlow at 30 s)",
            [
                (
                    "histogram_quantile(0.95, sum by (job, instance, route, le) "
                    '(rate({__name__=~"quiz_.+_http_request_duration_seconds_bucket"}[5m])))',
                    "{{route}} {{instance}}",
                ),
                (
                    "histogram_quantile(0.95, sum by (job, instance, endpoint, le) "
                    '(rate({__name__=~"quiz_.+_nats_request_duration_seconds_bucket"}[5m])))',
                    "{{endpoint}} {{instance}}",
                ),
            ],
            unit="s",
        ),
        _panel(
            "NATS requests in flight, by endpoint",
            [
                (
                    'sum by (__name__, endpoint) ({__name__=~"quiz_.+_nats_requests_in_flight"})',
                    "{{__name__}} {{endpoint}}",
                )
            ],
        ),
        _panel(
            "Periodic tasks: failed runs (1 h) and p95 duration",
            [
                (
                    "sum by (__name__, task) "
                    '(increase({__name__=~"quiz_.+_periodic_runs_total", outcome="error"}[1h]))',
                    "errors {{__name__}} {{task}}",
                ),
                (
                    "histogram_quantile(0.95, sum by (le, task) "
                    '(rate({__name__=~"quiz_.+_periodic_run_duration_seconds_bucket"}[5m])))',
                    "p95 {{task}}",
                ),
            ],
        ),
    ]


def panels() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [*health(), _row("RED per service (HTTP and NATS)")]
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
            "Circuit state per replica (0 closed, 1 half-open, 2 open), and its 2 min average"
            " (QuizLlmProviderDown at 1)",
            [
                (f"max by (instance) ({g}_circuit_state)", "{{instance}}"),
                (f"avg_over_time({g}_circuit_state[2m])", "2 min average {{instance}}"),
            ],
        ),
        _panel(
            "Provider requests by model and status (QuizLlmProviderErrors)",
            [
                (
                    f"sum by (model, status) (rate({g}_provider_requests_total[5m]))",
                    "{{model}} {{status}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Call p95 by purpose, and unreadable replies",
            [
                (_p95(f"{g}_call_duration_seconds", "purpose"), "p95 {{purpose}}"),
                (
                    f"sum by (purpose) (increase({g}_parse_failures_total[1h]))",
                    "parse failures (1 h) {{purpose}}",
                ),
            ],
        ),
        _panel(
            "Tokens settled by purpose and direction",
            [
                (
                    f"sum by (purpose, direction) (rate({g}_tokens_total[5m]))",
                    "{{purpose}} {{direction}}",
                )
            ],
        ),
        _panel(
            "Prompt cache tokens by model (read 0.1x, written 1.25x the input price)",
            [
                (
                    f"sum by (model, kind) (rate({g}_cache_tokens_total[5m]))",
                    "{{model}} {{kind}}",
                )
            ],
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
        _panel(
            "Request p95 by language, sandbox p95 by step",
            [
                (_p95("quiz_runner_request_seconds", "language"), "request {{language}}"),
                (_p95("quiz_runner_sandbox_seconds", "step"), "sandbox {{step}}"),
            ],
            unit="s",
        ),
        _panel(
            "Cases by how they ended",
            [("sum by (outcome) (rate(quiz_runner_cases_total[5m]))", "{{outcome}}")],
            unit="reqps",
        ),
        _row("Wand (editor-assist)"),
        _panel(
            "Wand calls by type and outcome",
            [
                (
                    "sum by (type, outcome) (rate(quiz_editor_assist_generate_total[5m]))",
                    "{{type}} {{outcome}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Proposals returned incomplete, by code (QuizWandIncomplete), and settle's runner"
            " calls",
            [
                (
                    "sum by (code) (rate(quiz_editor_assist_generate_incomplete_total[5m]))",
                    "incomplete {{code}}",
                ),
                (
                    "sum by (outcome) (rate(quiz_editor_assist_settle_runs_total[5m]))",
                    "runner call {{outcome}}",
                ),
            ],
            unit="reqps",
        ),
        _panel(
            "Proposals linted by review.v1.lint, by outcome (ok, or why without findings)",
            [
                (
                    "sum by (outcome) (rate(quiz_editor_assist_proposal_lints_total[5m]))",
                    "{{outcome}}",
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
        _panel(
            "Marks the model wrote, and polls re-read from another replica",
            [
                ("sum by (verdict) (rate(quiz_poll_ai_marks_total[5m]))", "mark {{verdict}}"),
                ("sum(rate(quiz_poll_reloads_total[5m]))", "reloads"),
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
            "Item-writing-flaw lints (review.v1.lint and its route), by outcome",
            [("sum by (outcome) (rate(quiz_review_lints_total[5m]))", "{{outcome}}")],
            unit="reqps",
        ),
        _panel(
            "Review's share of the cap used (24 h)",
            [(f'sum(increase({g}_cost_usd_total{{purpose="review"}}[24h])) / {cap}', "used")],
            unit="percentunit",
        ),
        _panel(
            "Review requests answered, and question-store events applied",
            [
                ("sum by (outcome) (rate(quiz_review_requests_total[5m]))", "request {{outcome}}"),
                ("sum by (kind) (rate(quiz_review_question_events_total[5m]))", "event {{kind}}"),
            ],
            unit="reqps",
        ),
        _row("Lesson fixes"),
        _panel(
            "Fixes by outcome, passes by try, verifications",
            [
                ("sum by (outcome) (rate(quiz_lesson_fix_fixes_total[5m]))", "fix {{outcome}}"),
                (
                    "sum by (attempt) (rate(quiz_lesson_fix_fix_passed_total[5m]))",
                    "passed on try {{attempt}}",
                ),
                (
                    "sum by (outcome) (rate(quiz_lesson_fix_verifications_total[5m]))",
                    "verification {{outcome}}",
                ),
            ],
            unit="reqps",
        ),
        _panel(
            "Lesson check p95 (target 0.1 s on a 300,000-character lesson)",
            [
                (
                    "histogram_quantile(0.95, sum by (le) "
                    "(rate(quiz_lesson_fix_check_duration_seconds_bucket[5m])))",
                    "p95",
                )
            ],
            unit="s",
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
            "Consumer handling p95 (delivery to ack, nak or term)",
            [
                (
                    "histogram_quantile(0.95, sum by (le, consumer) "
                    '(rate({__name__=~"quiz_.+_consumer_message_duration_seconds_bucket"}[5m])))',
                    "{{consumer}}",
                )
            ],
            unit="s",
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
                (
                    "sum by (reason) (increase(quiz_llm_gateway_journal_rejected_total[1h]))",
                    "journal entries refused (1 h, QuizLlmJournalForged) {{reason}}",
                ),
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
