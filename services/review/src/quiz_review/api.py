"""HTTP routes of review (ADR-060 §6, HQ reviewRoutes.ts): decode → call the service → encode.

Grants (JWT `grants`, the platform's resources): `pool:<id>` and `question:<id>`.
- the pool's tab and the pills: any grant on the pool (a question grant reaches its own pill);
- the switch: `owner` on the pool;
- Review now, Ignore, Fix/Undo: `contributor` on the question, or on the question's pool;
- the lint (`POST /pools/{id}/review/lint`, issue 30): the tab's grant, any grant on the pool.
What the caller may not reach answers 404 (invariant 6), before any work.
"""

from typing import Any

from fastapi import APIRouter, Request

from quiz_contracts.review import (
    LintReply,
    LintRequest,
    QuestionReview,
    ReviewFixRequest,
    ReviewFixResult,
    ReviewList,
    ReviewPillsReply,
    ReviewPillsRequest,
    ReviewToggle,
)
from quiz_review.deps import PoolOwner, PoolViewer, QuestionContributor, ReviewServiceDep
from quiz_servicekit.auth import current_identity
from quiz_servicekit.request_ids import IDEMPOTENCY_KEY_HEADER, caller_key

# A draft config is what the editor holds: the wand's bound (quiz_contracts.generate).
MAX_FIX_BODY_BYTES = 1 << 20

_COMMON: dict[int | str, dict[str, Any]] = {
    400: {"description": "invalid_request"},
    401: {"description": "unauthorized"},
    404: {"description": "not_found: no grant that reaches it"},
    413: {"description": "payload_too_large"},
}
_QUESTION: dict[int | str, dict[str, Any]] = {
    **_COMMON,
    400: {"description": "invalid_request, not_published, review_unsupported, no_review"},
    404: {"description": "not_found: no contributor grant on the question or its pool"},
}


router = APIRouter(prefix="/app/api", tags=["review"])


@router.get("/pools/{pool_id}/reviews", response_model=ReviewList, responses=_COMMON)
async def pool_reviews(
    pool_id: str,
    *,
    _: PoolViewer,
    service: ReviewServiceDep,
) -> ReviewList:
    """The pool's "LLM review" tab: the latest versions' open findings, reviewed/pending."""
    return await service.tab(pool_id)


@router.put("/pools/{pool_id}/review", response_model=ReviewList, responses=_COMMON)
async def pool_switch(
    pool_id: str,
    body: ReviewToggle,
    *,
    access: PoolOwner,
    service: ReviewServiceDep,
) -> ReviewList:
    """The owner turns the night's review of the pool on or off (off by default), and with
    `lint` the item-writing-flaw lint's notices in its reviews (off by default)."""
    return await service.set_pool(pool_id, body.enabled, access.identity.sub, body.lint)


@router.post("/reviews/pills", response_model=ReviewPillsReply, responses=_COMMON)
async def pills(
    body: ReviewPillsRequest,
    request: Request,
    service: ReviewServiceDep,
) -> ReviewPillsReply:
    """Pills of a page of questions; a question out of reach or without a row has none."""
    identity = await current_identity(request)

    def may_see(question_id: str, pool_id: str) -> bool:
        return f"pool:{pool_id}" in identity.grants or f"question:{question_id}" in identity.grants

    return ReviewPillsReply(pills=await service.pills(body.question_ids, may_see))


@router.post(
    "/questions/{question_id}/review",
    response_model=QuestionReview,
    responses={
        **_QUESTION,
        409: {"description": "llm_not_configured"},
        429: {"description": "rate_limited (per person per minute), llm_budget_exhausted"},
        502: {"description": "llm_failed"},
    },
)
async def review_now(
    question_id: str,
    request: Request,
    *,
    identity: QuestionContributor,
    service: ReviewServiceDep,
) -> QuestionReview:
    """ "Review now": the latest published version, purpose review, the teacher as user.

    An `Idempotency-Key` header names the click (a retry sends it again); without one the
    request is named by who sent it and its route (quiz_servicekit.request_ids)."""
    caller = caller_key(
        principal=identity.sub,
        method=request.method,
        path=request.url.path,
        body=None,
        idempotency_key=request.headers.get(IDEMPOTENCY_KEY_HEADER),
    )
    return await service.review_now(question_id, identity.sub, caller)


@router.post(
    "/questions/{question_id}/review/ignore",
    response_model=QuestionReview,
    responses={**_QUESTION, 409: {"description": "fix_stale: the review changed meanwhile"}},
)
async def ignore(
    question_id: str,
    *,
    _: QuestionContributor,
    service: ReviewServiceDep,
) -> QuestionReview:
    """Ignore the latest version's whole review: it leaves the tab, never reviewed again."""
    return await service.ignore(question_id)


@router.post(
    "/questions/{question_id}/review/fix",
    response_model=ReviewFixResult,
    max_body_size=MAX_FIX_BODY_BYTES,
    responses={
        **_QUESTION,
        400: {
            "description": "invalid_request, not_published, review_unsupported, no_review, no_fix"
        },
        409: {"description": "fix_stale: the draft no longer takes the replacement"},
    },
)
async def fix(
    question_id: str,
    body: ReviewFixRequest,
    *,
    _: QuestionContributor,
    service: ReviewServiceDep,
) -> ReviewFixResult:
    """Fix (or Undo, `undo: true`) one finding on the draft sent; answers the new draft."""
    return await service.fix(question_id, body)


@router.post(
    "/pools/{pool_id}/review/lint",
    response_model=LintReply,
    max_body_size=MAX_FIX_BODY_BYTES,
    responses={
        **_COMMON,
        400: {"description": "invalid_request, lint_unsupported: a type other than mcq"},
        422: {
            "description": "draft_invalid: the config is not a valid mcq (its problems); "
            "limit_exceeded: larger than any mcq can be"
        },
    },
)
async def lint(
    pool_id: str,
    body: LintRequest,
    *,
    _: PoolViewer,
    service: ReviewServiceDep,
) -> LintReply:
    """The item-writing-flaw lint of a draft or published mcq (the body of
    `review.v1.lint`): notices with their code, criterion and path; no model."""
    return service.lint(body)
