"""Every NATS subject with its request and reply models: the source of docs/asyncapi.json."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from quiz_contracts import subjects
from quiz_contracts.errors import ErrorBody
from quiz_contracts.generate import GenerateAvailability
from quiz_contracts.lesson import CheckReply, CheckRequest, FixCall, FixReply
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    UsageReply,
    UsageRequest,
)
from quiz_contracts.poll import BrainstormClose, BrainstormOpen, PollAck, PollAiJob, PollJoin
from quiz_contracts.review import (
    LintReply,
    LintRequest,
    QuestionDeleted,
    QuestionRetired,
    QuestionVersionDeleted,
    QuestionVersionPublished,
    ReviewCompleted,
    ReviewRequest,
)
from quiz_contracts.runner import RunReply, RunRequest


class EmptyRequest(BaseModel):
    """A request that takes no field."""


@dataclass(frozen=True)
class Operation:
    """One request/reply subject of a micro service."""

    subject: str
    service: str
    summary: str
    request: type[BaseModel]
    reply: type[BaseModel]


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        subjects.LLM_COMPLETE_BY_CALLER,
        "llm-gateway",
        "One model call under the day's cap, the person's limit and the purpose's model, as "
        "the caller the last token names (`llm.v1.complete.<bus user>`: only that user may "
        "publish it). Each caller has its purposes (quiz_contracts.llm.CALLER_PURPOSES); "
        "another's, or a billed_to its purpose may not set: forbidden, nothing spent.",
        CompleteRequest,
        CompleteReply,
    ),
    Operation(
        subjects.LLM_COMPLETE,
        "llm-gateway",
        "One model call as the operators (the `ops` user alone may publish it): any purpose.",
        CompleteRequest,
        CompleteReply,
    ),
    Operation(
        subjects.LLM_AVAILABILITY,
        "llm-gateway",
        "Whether a model can be called now, and per purpose the model.",
        AvailabilityRequest,
        AvailabilityReply,
    ),
    Operation(
        subjects.LLM_USAGE,
        "llm-gateway",
        "Today's spend by purpose and by person/no person, the cap and what is left.",
        UsageRequest,
        UsageReply,
    ),
    Operation(
        subjects.RUNNER_RUN,
        "runner",
        "Compile once, run every case in a sandbox; pictures for codeimage.",
        RunRequest,
        RunReply,
    ),
    Operation(
        subjects.GENERATE_AVAILABILITY,
        "editor-assist",
        "Whether the wand can be offered, and for which question types.",
        EmptyRequest,
        GenerateAvailability,
    ),
    Operation(
        subjects.REVIEW_LINT,
        "review",
        "The item-writing-flaw lint of an mcq (eleven rubric criteria, no model): notices "
        "with their code, criterion and path, and the criteria run.",
        LintRequest,
        LintReply,
    ),
    Operation(
        subjects.LESSON_CHECK,
        "lesson-fix",
        "The lesson checks of a whole lesson: its errors and warnings, each with its key.",
        CheckRequest,
        CheckReply,
    ),
    Operation(
        subjects.LESSON_FIX,
        "lesson-fix",
        "Fix with AI for a person: the finding found again by key, up to two model tries, "
        "replace_block operations that passed checkFix.",
        FixCall,
        FixReply,
    ),
    Operation(
        subjects.POLL_OPEN,
        "poll",
        "Open a brainstorm for an evaluation, or run one again (againOf: no mark, AI off); "
        "idempotent.",
        BrainstormOpen,
        PollAck,
    ),
    Operation(
        subjects.POLL_CLOSE,
        "poll",
        "The End of a brainstorm: no answer after it; it freezes 30 days later.",
        BrainstormClose,
        PollAck,
    ),
    Operation(
        subjects.POLL_JOIN,
        "poll",
        "A participant joined (an attempt, guest or account); an account's name is masked.",
        PollJoin,
        PollAck,
    ),
)


@dataclass(frozen=True)
class Channel:
    """One JetStream subject: at-least-once messages on a stream, not request/reply.

    `action` is the service's side: `receive` (it consumes) or `send` (it publishes).
    """

    subject: str
    stream: str
    service: str
    action: str
    summary: str
    payload: type[BaseModel]


CHANNELS: tuple[Channel, ...] = (
    Channel(
        subjects.QUESTION_VERSION_PUBLISHED,
        subjects.QUESTIONS_STREAM,
        "review",
        "receive",
        "The question store published a version (immutable): its type, config, explanation.",
        QuestionVersionPublished,
    ),
    Channel(
        subjects.QUESTION_VERSION_DELETED,
        subjects.QUESTIONS_STREAM,
        "review",
        "receive",
        "A version was deleted: its review row goes with it.",
        QuestionVersionDeleted,
    ),
    Channel(
        subjects.QUESTION_RETIRED,
        subjects.QUESTIONS_STREAM,
        "review",
        "receive",
        "A question was retired: no longer live, no longer reviewed.",
        QuestionRetired,
    ),
    Channel(
        subjects.QUESTION_DELETED,
        subjects.QUESTIONS_STREAM,
        "review",
        "receive",
        "A question was deleted with all its versions and their reviews.",
        QuestionDeleted,
    ),
    Channel(
        subjects.REVIEW_REQUESTS,
        subjects.REVIEW_REQUESTS_STREAM,
        "review",
        "receive",
        "Review a published version (work queue; set Nats-Msg-Id; one review per version).",
        ReviewRequest,
    ),
    Channel(
        subjects.REVIEW_COMPLETED,
        subjects.REVIEW_EVENTS_STREAM,
        "review",
        "send",
        "What became of one review request: the version's review, or why there is none.",
        ReviewCompleted,
    ),
    Channel(
        subjects.POLL_AI_JOBS,
        subjects.POLL_AI_STREAM,
        "poll",
        "receive",
        "Run a poll's AI pass (published by poll itself when an answer claims the lease; due "
        "3 s later; set Nats-Msg-Id to <evaluation>:<lease>).",
        PollAiJob,
    ),
)


_BY_SUBJECT = {op.subject: op for op in OPERATIONS}


def operation(subject: str) -> Operation:
    """The catalog's operation on `subject`; KeyError when the catalog does not list it."""
    return _BY_SUBJECT[subject]


def asyncapi_document() -> dict[str, Any]:
    """An AsyncAPI 3.0 document of the request/reply subjects, from the pydantic models."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    hoisted: dict[str, Any] = {}
    schemas: dict[str, Any] = {"ErrorBody": _schema(ErrorBody, hoisted)}
    for op in OPERATIONS:
        key = op.subject.replace(".", "_")
        for model in (op.request, op.reply):
            schemas[model.__name__] = _schema(model, hoisted)
            messages[model.__name__] = {
                "name": model.__name__,
                "contentType": "application/json",
                "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
            }
        channels[key] = {
            "address": op.subject,
            "description": f"{op.service}: {op.summary}",
            "messages": {
                "request": {"$ref": f"#/components/messages/{op.request.__name__}"},
                "reply": {"$ref": f"#/components/messages/{op.reply.__name__}"},
                "error": {"$ref": "#/components/messages/ErrorBody"},
            },
        }
        operations[key] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{key}"},
            "summary": op.summary,
            "messages": [{"$ref": f"#/channels/{key}/messages/request"}],
            "reply": {
                "messages": [
                    {"$ref": f"#/channels/{key}/messages/reply"},
                    {"$ref": f"#/channels/{key}/messages/error"},
                ]
            },
            "x-service": op.service,
        }
    for channel in CHANNELS:
        key = channel.subject.replace(".", "_")
        name = channel.payload.__name__
        schemas[name] = _schema(channel.payload, hoisted)
        messages[name] = {
            "name": name,
            "contentType": "application/json",
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
        channels[key] = {
            "address": channel.subject,
            "description": f"{channel.service}: {channel.summary}",
            "messages": {"event": {"$ref": f"#/components/messages/{name}"}},
            "x-jetstream-stream": channel.stream,
        }
        operations[key] = {
            "action": channel.action,
            "channel": {"$ref": f"#/channels/{key}"},
            "summary": channel.summary,
            "messages": [{"$ref": f"#/channels/{key}/messages/event"}],
            "x-service": channel.service,
        }
    messages["ErrorBody"] = {
        "name": "ErrorBody",
        "contentType": "application/json",
        "summary": "Error reply; headers Nats-Service-Error (the code) and -Code (HTTP status).",
        "payload": {"$ref": "#/components/schemas/ErrorBody"},
    }
    schemas.update(hoisted)
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Quiz platform LLM-assistance services",
            "version": "1.0.0",
            "description": "Request/reply subjects (NATS Services API; queue group = service) "
            "and JetStream subjects (x-jetstream-stream names the stream).",
        },
        "channels": dict(sorted(channels.items())),
        "operations": dict(sorted(operations.items())),
        "components": {
            "messages": dict(sorted(messages.items())),
            "schemas": dict(sorted(schemas.items())),
        },
    }


def _schema(model: type[BaseModel], defs: dict[str, Any]) -> dict[str, Any]:
    """The model's JSON Schema with its $defs hoisted to components/schemas."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs.update(schema.pop("$defs", {}))
    return schema
