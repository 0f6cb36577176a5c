"""The fix's model call through the llm-gateway (purpose `lesson_fix`), as `suggest_fix` takes it.

Used by the service and by `quiz-eval lesson-fix`, so the evaluation measures the very call the
route makes: same purpose (so the same model and per-person limit), same structured output.
"""

from __future__ import annotations

import uuid
from typing import Any

from quiz_contracts.llm import CompleteRequest, Effort, LlmMessage, OutputSchema, Purpose
from quiz_lesson_fix.domain.fix import (
    FIX_OUTPUT_DESCRIPTION,
    FIX_OUTPUT_NAME,
    Complete,
    Messages,
)
from quiz_servicekit.llm import LlmClient
from quiz_servicekit.request_ids import bounded_id


def gateway_complete(
    llm: LlmClient,
    user: str,
    *,
    deadline_s: float,
    max_output_tokens: int,
    caller: str | None = None,
) -> Complete:
    """`complete(system, messages, schema)` as one `llm.v1.complete` call per try.

    The person is the call's user (the gateway's attribution and per-person limit). Every try
    has its own request id: the second try is a different question, never a replay. With
    `caller` (the caller key of the person's request, `quiz_servicekit.request_ids`) the n-th
    try's id is `lesson-fix:<caller>:try-<n>`: the same request sent again is answered from the
    gateway's stored replies, try by try, free; without it (the evaluation, which measures
    fresh answers) each try gets a uuid. Errors are LlmClient's: `llm_not_configured`,
    `llm_budget_exhausted`, `rate_limited`, `llm_failed`.
    """
    tries = 0

    async def complete(
        system: str, messages: Messages, schema: dict[str, Any]
    ) -> dict[str, Any] | str:
        nonlocal tries
        tries += 1
        if caller is not None:
            request_id = bounded_id("lesson-fix", caller, f"try-{tries}")
        else:
            request_id = f"lesson-fix-{uuid.uuid4()}"
        reply = await llm.complete(
            CompleteRequest(
                purpose=Purpose.lesson_fix,
                user=user,
                effort=Effort.low,
                system=system,
                messages=[LlmMessage(role=m["role"], content=m["content"]) for m in messages],
                output_schema=OutputSchema(
                    name=FIX_OUTPUT_NAME, json_schema=schema, description=FIX_OUTPUT_DESCRIPTION
                ),
                max_output_tokens=max_output_tokens,
                request_id=request_id,
                deadline_s=deadline_s,
            )
        )
        return reply.output

    return complete
