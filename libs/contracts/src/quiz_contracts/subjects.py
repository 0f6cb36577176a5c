"""NATS subjects, versioned: within v1 changes are additive only."""

from __future__ import annotations

# llm-gateway (micro service "llm-gateway", queue group "llm-gateway").
LLM_COMPLETE = "llm.v1.complete"
LLM_AVAILABILITY = "llm.v1.availability"
LLM_USAGE = "llm.v1.usage"
# Issue 29 item 5: a service requests a model call on `llm.v1.complete.<its bus user>`, a
# subject only that user may publish (quiz_contracts.bus): the gateway learns the caller from
# the subject nats-server let through, never from the payload. The gateway serves the filter;
# the plain `llm.v1.complete` stays for the operators (`ops`, account-wide) alone.
LLM_COMPLETE_BY_CALLER = "llm.v1.complete.*"


def llm_complete_subject(caller: str) -> str:
    """`llm.v1.complete.<caller>`; ValueError for a caller that is not one subject token."""
    if not caller or any(c in caller for c in ".*> \t\r\n"):
        raise ValueError(f"not a subject token: {caller!r}")
    return f"{LLM_COMPLETE}.{caller}"


def llm_complete_caller(subject: str) -> str | None:
    """The caller a complete request's subject names: `llm.v1.complete.<caller>` → caller,
    the operators' plain `llm.v1.complete` → None."""
    head = LLM_COMPLETE + "."
    return subject[len(head) :] if subject.startswith(head) else None


# llm-gateway's settle journal (quiz_contracts.llm_journal): a JetStream stream of the paid
# calls' writes its database did not take, replayed by any replica. One subject per gateway
# database (`llm.v1.journal.<database id>`): a replica replays only its own database's entries.
LLM_PREFIX = "llm.v1"
LLM_JOURNAL_STREAM = "LLM_JOURNAL"


def llm_journal_subject(database_id: str) -> str:
    """`llm.v1.journal.<database id>`; ValueError for an id that is not one subject token."""
    if not database_id or any(c in database_id for c in ".*> \t\r\n"):
        raise ValueError(f"not a subject token: {database_id!r}")
    return f"{LLM_PREFIX}.journal.{database_id}"


def llm_journal_filter() -> str:
    """Every database's journal subject: `llm.v1.journal.*` (the stream's subjects)."""
    return f"{LLM_PREFIX}.journal.*"


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
# review (issue 30): the item-writing-flaw lint, request/reply (micro service "review").
REVIEW_LINT = "review.v1.lint"

# The platform's question store publishes these on its stream; review consumes them.
QUESTION_VERSION_PUBLISHED = "questions.v1.version.published"
QUESTION_VERSION_DELETED = "questions.v1.version.deleted"
QUESTION_RETIRED = "questions.v1.question.retired"
QUESTION_DELETED = "questions.v1.question.deleted"
QUESTIONS_STREAM = "QUESTIONS"

# lesson-fix (seed 003 "AI lesson fixes"): the lesson checks and "Fix with AI" for other
# services (micro service "lesson-fix").
LESSON_CHECK = "lesson.v1.check"
LESSON_FIX = "lesson.v1.fix"

# review / poll / lesson-fix reserve their prefixes here as they land.
REVIEW_PREFIX = "review.v1"
POLL_PREFIX = "poll.v1"
LESSON_FIX_PREFIX = "lesson.v1"

# poll (ADR-071): the platform's edge, request/reply (micro service "poll"): open or run again,
# close (the End), and a participant joined. Replies `PollAck` or `{code, message}`.
POLL_OPEN = "poll.v1.open"
POLL_CLOSE = "poll.v1.close"
POLL_JOIN = "poll.v1.join"
# poll: the AI pass of a poll whose lease was just claimed (ADR-072 §12 "one poll.ai job 3 s
# later"), a JetStream work queue so that any replica runs it and a dead replica's pass resumes.
POLL_AI_JOBS = "poll.v1.ai.jobs"
POLL_AI_STREAM = "POLL_AI"

# The micro service names: `$SRV.PING.<name>` answers per service.
SERVICE_NAMES = ("llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix")

# poll (ADR-071 §6): the live tally frames, published per evaluation for the platform's realtime
# layer. A function, not a constant: the evaluation id is one subject token.
POLL_TALLY_SUFFIX = "tally"


def poll_tally_subject(evaluation_id: str) -> str:
    """`poll.v1.<evaluation>.tally`; ValueError for an id that is not one plain subject token."""
    if not evaluation_id or any(c in evaluation_id for c in ".*> \t\r\n"):
        raise ValueError(f"not a subject token: {evaluation_id!r}")
    return f"{POLL_PREFIX}.{evaluation_id}.{POLL_TALLY_SUFFIX}"


def poll_tally_filter() -> str:
    """The subscription filter of every poll's frames: `poll.v1.*.tally`."""
    return f"{POLL_PREFIX}.*.{POLL_TALLY_SUFFIX}"


# The largest message our NATS servers take: `max_payload` in every configuration we ship
# (scripts/devrun.py, the testkit's nats-server, deploy/nats/accounts.conf,
# deploy/helm/nats-values.yaml). Contracts derive their size maxima from it: a message over it
# never reaches its service.
NATS_MAX_PAYLOAD = 8 * 1024 * 1024
