"""NATS endpoints of `llm-gateway`: decode → call the gateway → encode. Nothing else."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from quiz_contracts import subjects
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    UsageReply,
    UsageRequest,
)
from quiz_llm_gateway.service import Gateway
from quiz_servicekit.micro import EndpointSpec, MsgContext
from quiz_servicekit.telemetry import current_trace_id


def endpoints(
    gateway: Callable[[], Gateway], complete_concurrency: int
) -> list[EndpointSpec[BaseModel]]:
    """The three endpoints; `gateway()` is resolved per request (it is built in the lifespan)."""

    async def complete(req: CompleteRequest, _ctx: MsgContext) -> CompleteReply:
        return await gateway().complete(req, trace_id=current_trace_id())

    async def availability(req: AvailabilityRequest, _ctx: MsgContext) -> AvailabilityReply:
        return await gateway().availability(req.purpose)

    async def usage(req: UsageRequest, _ctx: MsgContext) -> UsageReply:
        return await gateway().usage(req.day, req.billed_to)

    return [
        EndpointSpec(
            "complete",
            subjects.LLM_COMPLETE,
            CompleteRequest,
            complete,  # type: ignore[arg-type]
            # Calls mostly wait on the provider: many may be in hand, in-flight is bounded apart.
            max_concurrency=complete_concurrency,
        ),
        EndpointSpec(
            "availability",
            subjects.LLM_AVAILABILITY,
            AvailabilityRequest,
            availability,  # type: ignore[arg-type]
        ),
        EndpointSpec("usage", subjects.LLM_USAGE, UsageRequest, usage),  # type: ignore[arg-type]
    ]
