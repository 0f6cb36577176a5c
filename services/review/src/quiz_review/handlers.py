"""NATS endpoints of review: decode → call the service → encode.

- `review.v1.lint` (issue 30): the item-writing-flaw lint of an mcq, for the platform and the
  wand (editor-assist); `draft_invalid`, `lint_unsupported` and `limit_exceeded` come back as
  `{code, message}` error replies.
"""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.review import LintReply, LintRequest
from quiz_review.service import ReviewService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint


def endpoints(service: ServiceRef[ReviewService]) -> list[EndpointSpec[Any]]:
    """The micro endpoints of review: the lint."""

    async def lint(request: LintRequest, _: MsgContext) -> LintReply:
        return service().lint(request)

    return [endpoint(subjects.REVIEW_LINT, lint)]
