"""HTTP routes of the runner: its slots, for operators (the `ops` grant). Nothing else."""

from fastapi import APIRouter, Depends

from quiz_contracts.runner import SlotsReply
from quiz_runner.deps import RunnerDep, ops_viewer

router = APIRouter(tags=["operations"], dependencies=[Depends(ops_viewer)])


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
