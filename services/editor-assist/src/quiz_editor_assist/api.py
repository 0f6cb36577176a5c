"""HTTP routes of the wand (ADR-059 §5): decode → call the service → encode."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateAvailability, GenerateRequest, GenerateResult
from quiz_editor_assist.service import GenerateService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import Access, Identity, current_identity, require_grant


def generate_router(generate_service: ServiceRef[GenerateService]) -> APIRouter:
    """The wand's routes; `generate_service` is the service its lifespan builds."""
    router = APIRouter(prefix="/app/api", tags=["generate"])

    @router.post(
        "/questions/{id}/generate",
        response_model=GenerateResult,
        responses={
            401: {"description": "unauthorized"},
            404: {"description": "not_found: no contributor grant on the question"},
            409: {"description": "llm_not_configured"},
            413: {"description": "payload_too_large"},
            422: {"description": "statement_empty, item_not_empty"},
            429: {"description": "llm_budget_exhausted, rate_limited"},
            502: {"description": "llm_failed"},
        },
    )
    async def generate(
        id: str,
        body: GenerateRequest,
        access: Access = Depends(require_grant("question:{id}", "contributor")),
        service: GenerateService = Depends(generate_service),
    ) -> GenerateResult:
        """Complete the draft as it stands; nothing is stored. The type is the grant's."""
        if not access.grant.type:
            raise ContractError(
                ErrorCode.invalid_request, f"The grant on {access.resource} has no type."
            )
        return await service.generate(access.grant.type, access.identity.sub, body)

    @router.get("/generate/availability", response_model=GenerateAvailability)
    async def availability(
        _: Identity = Depends(current_identity),
        service: GenerateService = Depends(generate_service),
    ) -> GenerateAvailability:
        """Whether the editor shows the wand, and for which types."""
        return await service.availability()

    return router
