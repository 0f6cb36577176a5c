"""NATS subjects, versioned: within v1 changes are additive only."""

from __future__ import annotations

# llm-gateway (micro service "llm-gateway", queue group "llm-gateway").
LLM_COMPLETE = "llm.v1.complete"
LLM_AVAILABILITY = "llm.v1.availability"
LLM_USAGE = "llm.v1.usage"

# runner (micro service "runner").
RUNNER_RUN = "runner.v1.run"

# editor-assist (micro service "editor-assist").
GENERATE_AVAILABILITY = "generate.v1.availability"

# review / poll / lesson-fix reserve their prefixes here as they land.
REVIEW_PREFIX = "review.v1"
POLL_PREFIX = "poll.v1"
LESSON_FIX_PREFIX = "lesson.v1"

# The micro service names: `$SRV.PING.<name>` answers per service.
SERVICE_NAMES = ("llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix")

# The largest message our NATS servers take: `max_payload` in every configuration we ship
# (scripts/devrun.py, the testkit's nats-server, deploy/compose/nats.conf,
# deploy/helm/nats-values.yaml). Contracts derive their size maxima from it: a message over it
# never reaches its service.
NATS_MAX_PAYLOAD = 8 * 1024 * 1024
