"""HTTP routes of lesson-fix (seed 003): decode → call the service → encode.

Grants: the routes take no lesson id (the editor sends the whole lesson), so they are guarded by
the platform-wide `lessons` grant: `viewer` to run the checks, `contributor` (a lesson author)
to ask for a fix, which spends model calls. Without it the routes answer 404.
"""

from typing import Any

from fastapi import APIRouter, Request

from quiz_contracts.lesson import MAX_FIX_BODY_BYTES, CheckReply, CheckRequest, FixReply, FixRequest
from quiz_lesson_fix.deps import LessonFixServiceDep, LessonsContributor, LessonsViewer
from quiz_servicekit.request_ids import IDEMPOTENCY_KEY_HEADER, caller_key

_COMMON: dict[int | str, dict[str, Any]] = {
    400: {"description": "invalid_request"},
    401: {"description": "unauthorized"},
    404: {"description": "not_found: no grant on lessons"},
    413: {"description": "payload_too_large (body), lesson_too_large (over 300,000 characters)"},
}


router = APIRouter(prefix="/app/api/lessons", tags=["lessons"])


@router.post(
    "/check",
    response_model=CheckReply,
    max_body_size=MAX_FIX_BODY_BYTES,
    responses=_COMMON,
)
async def check(
    body: CheckRequest,
    *,
    _: LessonsViewer,
    service: LessonFixServiceDep,
) -> CheckReply:
    """The lesson checks: errors then warnings, each with the key a fix names."""
    return await service.check(body.lesson_data)


@router.post(
    "/fix",
    response_model=FixReply,
    max_body_size=MAX_FIX_BODY_BYTES,
    responses={
        **_COMMON,
        400: {"description": "invalid_request, no_ai_fix"},
        403: {"description": "verification_failed"},
        404: {"description": "not_found: no contributor grant on lessons"},
        409: {"description": "finding_gone, llm_not_configured"},
        422: {"description": "fix_failed: no try passed checkFix"},
        429: {"description": "rate_limited, llm_budget_exhausted"},
        502: {"description": "verification_unavailable, llm_failed"},
    },
)
async def fix(
    body: FixRequest,
    request: Request,
    *,
    access: LessonsContributor,
    service: LessonFixServiceDep,
) -> FixReply:
    """Fix with AI: one finding, by key; `replace_block` operations that passed checkFix.

    Its model calls are named by the request (an `Idempotency-Key` header, else who, the
    route and the body: quiz_servicekit.request_ids), so a retry is not paid again."""
    caller = caller_key(
        principal=access.identity.sub,
        method=request.method,
        path=request.url.path,
        body=body,
        idempotency_key=request.headers.get(IDEMPOTENCY_KEY_HEADER),
    )
    return await service.fix(
        access.identity.sub, body.lesson_data, body.findingKey, token=body.token, caller=caller
    )
