"""HTTP routes of the runner: its slots, for operators (the `ops` grant). Nothing else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends

from quiz_runner.service import RunnerService
from quiz_servicekit.auth import require_grant


def slots_router(service: Callable[[], RunnerService]) -> APIRouter:
    """`GET /slots`: total, busy, free, refused so far, the backend and its languages."""
    # Operators only: anybody else gets the 404 of a route that does not exist for them.
    router = APIRouter(tags=["operations"], dependencies=[Depends(require_grant("ops", "viewer"))])

    @router.get("/slots")
    async def slots() -> dict[str, Any]:
        svc = service()
        ok, detail = svc.sandbox.ready()
        return {
            "total": svc.slots.total,
            "busy": svc.slots.busy,
            "free": svc.slots.free,
            "refused": svc.slots.refused,
            "backend": svc.sandbox.name,
            "sandbox_ready": ok,
            "sandbox_detail": detail,
            "languages": [lang.value for lang in svc.languages()],
        }

    return router
