"""HTTP routes of the runner: its slots, for operators (the `ops` grant). Nothing else."""

from typing import Annotated

from fastapi import APIRouter, Depends

from quiz_contracts.runner import SlotsReply
from quiz_runner.service import RunnerService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import require_grant


def slots_router(runner: ServiceRef[RunnerService]) -> APIRouter:
    """`GET /slots` (`SlotsReply`); `runner` is the service its lifespan builds."""
    # Operators only: anybody else gets the 404 of a route that does not exist for them.
    router = APIRouter(tags=["operations"], dependencies=[Depends(require_grant("ops", "viewer"))])
    RunnerDep = Annotated[RunnerService, Depends(runner.resolve)]

    @router.get("/slots", response_model=SlotsReply)
    async def slots(svc: RunnerDep) -> SlotsReply:
        """Total, busy, free, refused so far, the backend, whether it is ready, its languages."""
        ok, detail = svc.sandbox.ready()
        return SlotsReply(
            total=svc.slots.total,
            busy=svc.slots.busy,
            free=svc.slots.free,
            refused=svc.slots.refused,
            backend=svc.sandbox.name,
            sandbox_ready=ok,
            sandbox_detail=detail,
            languages=svc.languages(),
        )

    return router
