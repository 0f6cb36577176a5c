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

# review (ADR-060): JetStream work, not request/reply. Requests go to a work-queue stream
# (deduplicated by Nats-Msg-Id); each handled request ends in one completed event.
REVIEW_REQUESTS = "review.v1.requests"
REVIEW_COMPLETED = "review.v1.completed"
REVIEW_REQUESTS_STREAM = "REVIEW_REQUESTS"
REVIEW_EVENTS_STREAM = "REVIEW_EVENTS"

# The platform's question store publishes these on its stream; review consumes them.
QUESTION_VERSION_PUBLISHED = "questions.v1.version.published"
QUESTION_VERSION_DELETED = "questions.v1.version.deleted"
QUESTION_RETIRED = "questions.v1.question.retired"
QUESTION_DELETED = "questions.v1.question.deleted"
QUESTIONS_STREAM = "QUESTIONS"

# review / poll / lesson-fix reserve their prefixes here as they land.
REVIEW_PREFIX = "review.v1"
POLL_PREFIX = "poll.v1"
LESSON_FIX_PREFIX = "lesson.v1"

# The micro service names: `$SRV.PING.<name>` answers per service.
SERVICE_NAMES = ("llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix")
