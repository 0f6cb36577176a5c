"""NATS endpoints of `llm-gateway`: decode → call the gateway → encode. Nothing else."""

from __future__ import annotations

from typing import Any

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
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint
from quiz_servicekit.telemetry import current_trace_id


def endpoints(gateway: ServiceRef[Gateway], complete_concurrency: int) -> list[EndpointSpec[Any]]:
    """The endpoints of the catalog's llm.v1 subjects (complete on the callers' subjects and
    the operators' plain one)."""

    async def complete(req: CompleteRequest, ctx: MsgContext) -> CompleteReply:
        # The caller is the subject's last token, which only that bus user may publish.
        caller = subjects.llm_complete_caller(ctx.subject)
        return await gateway().complete(req, trace_id=current_trace_id(), caller=caller)

    async def availability(req: AvailabilityRequest, _ctx: MsgContext) -> AvailabilityReply:
        return await gateway().availability(req.purpose)

    async def usage(req: UsageRequest, _ctx: MsgContext) -> UsageReply:
        return await gateway().usage(req.day, req.billed_to, req.estimate, req.prompt_chars)

    return [
        # Calls mostly wait on the provider: many may be in hand, in-flight is bounded apart.
        endpoint(
            subjects.LLM_COMPLETE_BY_CALLER,
            complete,
            name="complete-by-caller",
            max_concurrency=complete_concurrency,
        ),
        # The operators' (`ops` alone may publish it).
        endpoint(subjects.LLM_COMPLETE, complete, max_concurrency=complete_concurrency),
        endpoint(subjects.LLM_AVAILABILITY, availability),
        endpoint(subjects.LLM_USAGE, usage),
    ]
