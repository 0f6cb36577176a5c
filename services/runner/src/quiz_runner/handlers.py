"""NATS endpoint of `runner`: decode → RunnerService.run → encode. Nothing else."""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.runner import RunReply, RunRequest
from quiz_runner.service import RunnerService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint


def endpoints(service: ServiceRef[RunnerService], slots: int) -> list[EndpointSpec[Any]]:
    """`run` on runner.v1.run (the catalog's `RunRequest`); `service()` is resolved per request."""

    async def run(req: RunRequest, _ctx: MsgContext) -> RunReply:
        return await service().run(req)

    return [
        endpoint(
            subjects.RUNNER_RUN,
            run,
            # More in hand than slots, so that the surplus reaches the handler and is answered
            # runner_busy at once instead of waiting in the subscription's queue.
            max_concurrency=slots * 4 + 16,
            metadata={"slots": str(slots)},
        )
    ]
