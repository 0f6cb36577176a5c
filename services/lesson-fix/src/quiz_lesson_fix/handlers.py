"""NATS endpoints of lesson-fix: decode → call the service → encode."""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.lesson import CheckReply, CheckRequest, FixCall, FixReply
from quiz_lesson_fix.service import LessonFixService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint
from quiz_servicekit.request_ids import IDEMPOTENCY_KEY_HEADER, caller_key

CHECKS_IN_HAND = 16
FIXES_IN_HAND = 64


def endpoints(service: ServiceRef[LessonFixService]) -> list[EndpointSpec[Any]]:
    """`lesson.v1.check` and `lesson.v1.fix`, for other services."""

    async def check(request: CheckRequest, _: MsgContext) -> CheckReply:
        return await service().check(request.lesson_data)

    async def fix(request: FixCall, context: MsgContext) -> FixReply:
        # The calling service vouches for its person: no human verification on the bus. Its
        # request is named like an HTTP one: an Idempotency-Key header, else who and what.
        caller = caller_key(
            principal=request.user,
            method="REQUEST",
            path=context.subject,
            body=request,
            idempotency_key=context.headers.get(IDEMPOTENCY_KEY_HEADER),
        )
        return await service().fix(
            request.user, request.lesson_data, request.findingKey, token=None, caller=caller
        )

    # Each request in hand holds a lesson of up to 300,000 characters (~6 MB parsed and checked):
    # checks are CPU on a couple of threads, so few wait in hand; a fix mostly waits on the model.
    return [
        endpoint(subjects.LESSON_CHECK, check, max_concurrency=CHECKS_IN_HAND),
        endpoint(subjects.LESSON_FIX, fix, max_concurrency=FIXES_IN_HAND),
    ]
