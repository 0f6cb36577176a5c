"""Admin HTTP view of today's usage and availability (internal port, beside /metrics)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from fastapi import APIRouter

from quiz_contracts.llm import AvailabilityReply, Purpose, UsageReply
from quiz_llm_gateway.service import Gateway


def admin_router(gateway: Callable[[], Gateway]) -> APIRouter:
    """`GET /admin/usage` and `GET /admin/availability`: decode → call → encode."""
    router = APIRouter(prefix="/admin", tags=["admin"])

    @router.get("/usage", response_model=UsageReply)
    async def usage(day: date | None = None, billed_to: str | None = None) -> UsageReply:
        return await gateway().usage(day, billed_to)

    @router.get("/availability", response_model=AvailabilityReply)
    async def availability(purpose: Purpose | None = None) -> AvailabilityReply:
        return await gateway().availability(purpose)

    return router
