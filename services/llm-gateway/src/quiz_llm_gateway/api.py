"""Admin HTTP view of today's usage and availability, for holders of the `ops` grant."""

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends

from quiz_contracts.llm import AvailabilityReply, Purpose, UsageReply
from quiz_llm_gateway.service import Gateway
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import require_grant


def admin_router(gateway: ServiceRef[Gateway]) -> APIRouter:
    """`GET /admin/usage` and `GET /admin/availability`: decode → call → encode."""
    # Spend by payer is personal data: only operators (grant "ops", viewer or more) see it;
    # anybody else gets the 404 of a route that does not exist for them.
    router = APIRouter(
        prefix="/admin", tags=["admin"], dependencies=[Depends(require_grant("ops", "viewer"))]
    )
    GatewayDep = Annotated[Gateway, Depends(gateway.resolve)]

    @router.get("/usage", response_model=UsageReply)
    async def usage(
        svc: GatewayDep, day: date | None = None, billed_to: str | None = None
    ) -> UsageReply:
        return await svc.usage(day, billed_to)

    @router.get("/availability", response_model=AvailabilityReply)
    async def availability(svc: GatewayDep, purpose: Purpose | None = None) -> AvailabilityReply:
        return await svc.availability(purpose)

    return router
