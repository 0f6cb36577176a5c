"""The typed client of the llm-gateway: `complete`, `availability`, `usage` over NATS.

Every service that calls a model goes through it, so each sees the gateway the same way:
- `complete` waits for the call's own deadline plus a margin (the gateway stops retrying before
  the deadline and must have time to say why), and lets through only the codes a caller may
  show a person (ADR-059 §5, ADR-060, ADR-071): `llm_not_configured`, `llm_budget_exhausted`,
  `rate_limited`, `llm_failed`. Anything else (no gateway, a timeout, a reply we cannot read,
  a request the gateway refused) is `llm_failed`: our fault upstream, not the person's. One
  exception: a request too large for the bus is the person's input, `payload_too_large` (413).
- `complete` stamps the call's absolute deadline (`deadline_at`, from `deadline_s`): a gateway
  that gets the message after it (paused, backlogged) makes no provider request for it.
- `availability` fails closed: when the gateway cannot be asked, no model can be called.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    Purpose,
    UsageReply,
    UsageRequest,
)
from quiz_servicekit.natsio import request

# What a caller may see of a gateway failure; every other code leaves as llm_failed.
CALLER_CODES = frozenset(
    {
        ErrorCode.llm_not_configured,
        ErrorCode.llm_budget_exhausted,
        ErrorCode.rate_limited,
        ErrorCode.llm_failed,
    }
)
# The gateway's own deadline for a call that names none (its LLM_GATEWAY_DEFAULT_DEADLINE_S).
GATEWAY_DEFAULT_DEADLINE_S = 60.0


def with_deadline_at(call: CompleteRequest, wait_s: float | None = None) -> CompleteRequest:
    """`call` stamped with its absolute deadline: now + deadline_s, or + `wait_s` when this
    send is waited for less (a repeat), or an earlier one the call carries. The gateway starts
    no provider request past it, however late the message reaches it. Stamp each send: a
    repeat of a request id gets a deadline of its own."""
    left = call.deadline_s or GATEWAY_DEFAULT_DEADLINE_S
    if wait_s is not None:
        left = min(left, wait_s)
    at = datetime.now(UTC) + timedelta(seconds=left)
    if call.deadline_at is not None and call.deadline_at < at:
        return call
    return call.model_copy(update={"deadline_at": at})


class LlmClient:
    """The llm-gateway seen from a service: typed calls, the caller-facing error codes."""

    def __init__(
        self,
        nc: NATS,
        *,
        deadline_margin_s: float = 5.0,
        query_timeout_s: float = 5.0,
    ) -> None:
        self._nc = nc
        self.deadline_margin_s = deadline_margin_s
        self.query_timeout_s = query_timeout_s

    async def complete(self, call: CompleteRequest) -> CompleteReply:
        """One model call; ContractError with one of CALLER_CODES on any failure."""
        deadline = call.deadline_s or GATEWAY_DEFAULT_DEADLINE_S
        try:
            return await request(
                self._nc,
                subjects.LLM_COMPLETE,
                with_deadline_at(call),
                CompleteReply,
                timeout=deadline + self.deadline_margin_s,
                unavailable_code=ErrorCode.llm_failed,
            )
        except ContractError as e:
            if e.code in CALLER_CODES or e.code is ErrorCode.payload_too_large:
                raise
            raise ContractError(
                ErrorCode.llm_failed,
                f"The model could not be called: {e.message}",
                retry_after_s=e.retry_after_s,
            ) from e

    async def availability(self, purpose: Purpose | None = None) -> AvailabilityReply:
        """Whether a model can be called now; unavailable (llm_failed) when nobody answers."""
        try:
            return await request(
                self._nc,
                subjects.LLM_AVAILABILITY,
                AvailabilityRequest(purpose=purpose),
                AvailabilityReply,
                timeout=self.query_timeout_s,
            )
        except ContractError:
            # Fail closed: offering a button that can only fail is worse than hiding it.
            return AvailabilityReply(
                available=False,
                reason=ErrorCode.llm_failed,
                models={},
                remaining_usd=Decimal(0),
            )

    async def usage(
        self,
        day: date | None = None,
        billed_to: str | None = None,
        estimate: CompleteRequest | None = None,
    ) -> UsageReply:
        """The day's spend (today, Europe/Zurich, by default); ContractError when unanswered.

        With `estimate`, the reply's `estimate_usd` is the worst case the gateway would hold
        for exactly that request (ADR-060 §5).
        """
        return await request(
            self._nc,
            subjects.LLM_USAGE,
            UsageRequest(day=day, billed_to=billed_to, estimate=estimate),
            UsageReply,
            timeout=self.query_timeout_s,
        )
