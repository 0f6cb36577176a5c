"""HTTP routes of the wand: decode, call the service, encode. Nothing else."""

from fastapi import APIRouter, Request

from quiz_contracts.errors import ContractError, ErrorBody, ErrorCode
from quiz_contracts.generate import (
    GENERATE_MAX_BODY_BYTES,
    GenerateAvailability,
    GenerateRequest,
    GenerateResult,
)
from quiz_editor_assist.deps import Caller, GenerateServiceDep, QuestionContributor
from quiz_servicekit.request_ids import IDEMPOTENCY_KEY_HEADER, caller_key


def _error(description: str) -> dict[str, object]:
    return {"model": ErrorBody, "description": description}


router = APIRouter(prefix="/app/api", tags=["generate"])


@router.post(
    "/questions/{id}/generate",
    response_model=GenerateResult,
    summary="Complete the draft of a question (ADR-059, the wand)",
    # The edge refuses a longer body with 413 before reading it (quiz_servicekit.http).
    max_body_size=GENERATE_MAX_BODY_BYTES,
    responses={
        400: _error("invalid_request: a body that is not a GenerateRequest"),
        401: _error("unauthorized: no valid bearer token"),
        404: _error("not_found: no contributor grant on the question"),
        409: _error("llm_not_configured"),
        413: _error("payload_too_large: a body over GENERATE_MAX_BODY_BYTES"),
        422: _error(
            "generate_unsupported (a type or item without a wand), statement_empty, "
            "item_not_empty, limit_exceeded (a statement over 20,000 characters, a draft "
            "larger than its type allows, or one too large for the message bus), "
            "draft_invalid (a draft that does not read as the grant's type: "
            "details.problems), idempotency_key_reused (an Idempotency-Key sent again with "
            "another body)"
        ),
        429: _error("llm_budget_exhausted, rate_limited (with Retry-After)"),
        502: _error("llm_failed"),
    },
)
async def generate(
    id: str,
    body: GenerateRequest,
    request: Request,
    *,
    access: QuestionContributor,
    service: GenerateServiceDep,
) -> GenerateResult:
    """Complete the draft as it stands; nothing is stored. The type is the grant's.

    The model call is named by the request (an `Idempotency-Key` header, else who, the
    route and the body: quiz_servicekit.request_ids), so a retry is not paid again."""
    if not access.grant.type:
        raise ContractError(
            ErrorCode.invalid_request, f"The grant on {access.resource} has no type."
        )
    caller = caller_key(
        principal=access.identity.sub,
        method=request.method,
        path=request.url.path,
        body=body,
        idempotency_key=request.headers.get(IDEMPOTENCY_KEY_HEADER),
    )
    return await service.generate(access.grant.type, access.identity.sub, body, caller)


@router.get(
    "/generate/availability",
    response_model=GenerateAvailability,
    responses={401: _error("unauthorized: no valid bearer token")},
)
async def availability(
    *,
    _: Caller,
    service: GenerateServiceDep,
) -> GenerateAvailability:
    """Whether the editor shows the wand, and for which types."""
    return await service.availability()
