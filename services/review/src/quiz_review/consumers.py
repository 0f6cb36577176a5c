"""JetStream consumers of review: the question store's events and the review requests.

Declared in main.py; each handler decodes (the kit) → calls the service → returns (ack).
- `QUESTIONS` (`questions.v1.*`): one durable consumer per event kind, so a slow kind never
  holds another; every handler is idempotent (see `repository`).
- `REVIEW_REQUESTS` (`review.v1.requests`, work queue, deduplicated by `Nats-Msg-Id` in the
  stream's window and by version in the service) → `review.v1.completed` on `REVIEW_EVENTS`.
"""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.review import (
    QuestionDeleted,
    QuestionRetired,
    QuestionVersionDeleted,
    QuestionVersionPublished,
    ReviewRequest,
)
from quiz_review.config import Settings
from quiz_review.service import ReviewService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.jetstream import ConsumerSpec, Delivery

# The streams (REVIEW_REQUESTS, REVIEW_EVENTS, the question store's QUESTIONS) and these
# consumers are provisioned by operations from quiz_contracts.topology (issue 29 item 1):
# review checks they exist, updates its consumers to its settings, creates no stream.


def consumers(service: ServiceRef[ReviewService], settings: Settings) -> list[ConsumerSpec[Any]]:
    """The four question-event consumers and the review-request consumer."""

    async def published(event: QuestionVersionPublished, _: Delivery) -> None:
        await service().on_published(event)

    async def version_deleted(event: QuestionVersionDeleted, _: Delivery) -> None:
        await service().on_version_deleted(event)

    async def retired(event: QuestionRetired, _: Delivery) -> None:
        await service().on_retired(event)

    async def deleted(event: QuestionDeleted, _: Delivery) -> None:
        await service().on_deleted(event)

    async def review(request: ReviewRequest, delivery: Delivery) -> None:
        # The outcome's id follows the request's stream position: a redelivery publishes once.
        # Until its last delivery, a request for a version not yet in the read model waits
        # (nak, redelivered after 1, 5, 30 s…): its version event may still be on its way.
        await service().handle_request(
            request,
            f"review-completed:{delivery.stream}:{delivery.stream_seq}",
            may_wait=not delivery.last_attempt,
        )

    def question_consumer(name: str, subject: str, model: Any, handler: Any) -> ConsumerSpec[Any]:
        return ConsumerSpec(
            name=f"review-{name}",
            stream=subjects.QUESTIONS_STREAM,
            model=model,
            handler=handler,
            filter_subjects=(subject,),
            max_in_flight=8,
            timeout_s=60.0,
            description=f"review's read model: {subject}",
        )

    return [
        question_consumer(
            "version-published",
            subjects.QUESTION_VERSION_PUBLISHED,
            QuestionVersionPublished,
            published,
        ),
        question_consumer(
            "version-deleted",
            subjects.QUESTION_VERSION_DELETED,
            QuestionVersionDeleted,
            version_deleted,
        ),
        question_consumer("question-retired", subjects.QUESTION_RETIRED, QuestionRetired, retired),
        question_consumer("question-deleted", subjects.QUESTION_DELETED, QuestionDeleted, deleted),
        ConsumerSpec(
            name="review-requests",
            stream=subjects.REVIEW_REQUESTS_STREAM,
            model=ReviewRequest,
            handler=review,
            ack_wait_s=settings.request_ack_wait_s,
            max_deliver=settings.request_max_deliver,
            max_in_flight=settings.request_concurrency,
            timeout_s=settings.llm_deadline_s + 30.0,
            description="review.v1.requests → review.v1.completed",
        ),
    ]
