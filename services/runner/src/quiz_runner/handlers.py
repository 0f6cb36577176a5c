"""NATS endpoint of `runner`: decode → RunnerService.run → encode. Nothing else."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from quiz_contracts import subjects
from quiz_contracts.runner import RunReply, RunRequest
from quiz_runner.service import RunnerService
from quiz_servicekit.micro import EndpointSpec, MsgContext


def endpoints(service: Callable[[], RunnerService], slots: int) -> list[EndpointSpec[BaseModel]]:
    """`run` on runner.v1.run; `service()` is resolved per request (built in the lifespan)."""

    async def run(req: RunRequest, _ctx: MsgContext) -> RunReply:
        return await service().run(req)

    return [
        EndpointSpec(
            "run",
            subjects.RUNNER_RUN,
            RunRequest,
            run,  # type: ignore[arg-type]
            # More in hand than slots, so that the surplus reaches the handler and is answered
            # runner_busy at once instead of waiting in the subscription's queue.
            max_concurrency=slots * 4 + 16,
            metadata={"slots": str(slots)},
        )
    ]
