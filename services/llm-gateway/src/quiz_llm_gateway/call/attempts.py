"""The attempts of one call: at most two, each under its own hold (admit, provider, settle).

Refused before any hold: no provider configured (`llm_not_configured`), an invalid output
schema (`invalid_request`), an open circuit or a caller's deadline already passed
(`llm_failed`). A paid answer is judged (`ok`, `unreadable`, `cut`, `error`) and settled before
the call answers or raises; an unreadable answer is asked once more with the problem named.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from quiz_contracts.errors import NOT_CONFIGURED_MESSAGE, ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_llm_gateway.admission.admissions import Admissions
from quiz_llm_gateway.admission.leases import CapSlices
from quiz_llm_gateway.call.provider import ProviderReply
from quiz_llm_gateway.call.record import CallRecord
from quiz_llm_gateway.call.retries import ProviderCalls, ProviderFailure
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.circuit import CircuitBreaker
from quiz_llm_gateway.domain.deadlines import time_left_s
from quiz_llm_gateway.domain.output import (
    InvalidSchema,
    Unreadable,
    cached_validator,
    forced_tool,
    read_text_output,
    read_tool_output,
    retry_messages,
)
from quiz_llm_gateway.domain.pricing import (
    ModelPrice,
    estimate_input_tokens,
    usd,
    worst_case_micros,
)
from quiz_llm_gateway.domain.providers import unusable
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.settlement.ledger import Ledger

log = logging.getLogger(__name__)
Output = dict[str, Any] | str | Unreadable


class Attempts:
    """Runs a call's attempts to a reply or a `ContractError`, every paid answer settled."""

    def __init__(
        self,
        provider: ProviderCalls | None,
        circuit: CircuitBreaker,
        admissions: Admissions,
        ledger: Ledger,
        slices: CapSlices,
        metrics: GatewayMetrics,
        settings: Settings,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.provider = provider
        self.circuit = circuit
        self.admissions = admissions
        self.ledger = ledger
        self.slices = slices
        self.metrics = metrics
        self.settings = settings
        self.clock = clock
        self.monotonic = monotonic

    async def run(self, call: CallRecord) -> CompleteReply:
        """The call's reply: its first readable answer (attempt 1, else 2)."""
        req = call.request
        if self.provider is None:
            await self._refuse(call, ErrorCode.llm_not_configured)
            raise ContractError(ErrorCode.llm_not_configured, NOT_CONFIGURED_MESSAGE)
        why = self.unusable(req.purpose.value, call.model)
        if why is not None:
            # Issue 31: residency forbids this model, or its provider has no key / base URL.
            await self._refuse(call, ErrorCode.llm_not_configured)
            raise ContractError(ErrorCode.llm_not_configured, why)
        validator = None
        if req.output_schema is not None:
            try:
                validator = cached_validator(req.output_schema.json_schema)
            except InvalidSchema as e:
                raise ContractError(ErrorCode.invalid_request, str(e)) from e
        messages, tools = request_shape(req)
        if not self.circuit.admits(self.monotonic()):
            retry = self.circuit.retry_after(self.monotonic())
            await self._refuse(call, ErrorCode.llm_failed)
            raise ContractError(
                ErrorCode.llm_failed, "the provider is failing (circuit open)", retry_after_s=retry
            )
        deadline = call.started + time_left_s(req, self.settings.default_deadline_s, self.clock)
        if deadline <= self.monotonic():
            # Nobody waits for this answer any more (the message reached us late: a paused or
            # backlogged replica): no hold, no provider request, a refusal row.
            await self._refuse(call, ErrorCode.llm_failed)
            raise ContractError(
                ErrorCode.llm_failed, "the caller's deadline passed before the call started"
            )

        def read(content: list[dict[str, Any]]) -> Output:
            if tools is not None and validator is not None:
                return read_tool_output(content, tools[0]["name"], validator)
            return read_text_output(content)

        for attempt in (1, 2):
            reply, output = await self._attempt(call, attempt, messages, tools, deadline, read)
            if not isinstance(output, Unreadable):
                return CompleteReply(
                    output=output,
                    model=call.model,
                    usage=call.usage(),
                    attempts=attempt,
                    call_id=call.call_id,
                    stop_reason=reply.stop_reason,
                )
            self.metrics.child(self.metrics.parse_failures, req.purpose.value).inc()
            log.info("call %s attempt %d unreadable: %s", call.call_id, attempt, output.problem)
            messages = retry_messages(messages, reply.content, output)
        raise ContractError(ErrorCode.llm_failed, "the model's reply was unreadable twice")

    async def _refuse(self, call: CallRecord, code: ErrorCode) -> None:
        """The ledger row of a call refused before any hold."""
        row = call.ledger_row(attempt=0, outcome="refused", now=self.clock(), error_code=code.value)
        await self.admissions.refuse(row)

    def unusable(self, purpose: str, model: str) -> str | None:
        """Why `purpose` may not call `model` here (LLM_DATA_RESIDENCY, or no provider for
        it: `domain.providers.unusable`), None when it may."""
        if self.provider is None:
            return NOT_CONFIGURED_MESSAGE
        serves = getattr(self.provider.provider, "serves", None)
        served = serves(model) if serves is not None else True
        return unusable(purpose, model, self.settings.data_residency, served)

    async def _attempt(
        self,
        call: CallRecord,
        attempt: int,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        deadline: float,
        read: Callable[[list[dict[str, Any]]], Output],
    ) -> tuple[ProviderReply, Output]:
        """One readable-or-not answer under its own hold: admit, call (with retries), settle."""
        assert self.provider is not None
        now = self.clock()
        worst = attempt_worst_case(call.price, call.request, messages, tools)
        refusal = call.ledger_row(attempt=0, outcome="refused", now=now)
        held = await self.admissions.admit(
            call.request,
            call.call_id,
            refusal,
            attempt=attempt,
            worst_micros=worst,
            deadline=deadline,
            now=now,
        )
        call.attempts = attempt
        began = self.monotonic()
        try:
            reply, requests = await self.provider.call(call, messages, tools, deadline)
            call.requests += requests
        except ProviderFailure as e:
            call.requests += e.requests
            row = call.ledger_row(
                attempt=attempt,
                outcome="provider_error",
                now=now,
                held=held,
                error_code=ErrorCode.llm_failed.value,
                requests=e.requests,
                latency_s=self.monotonic() - began,
            )
            try:
                await self.ledger.settle(held, row)
            finally:
                self.slices.settled(held, 0)
            raise ContractError(ErrorCode.llm_failed, str(e), retry_after_s=e.retry_after_s) from e
        # From here the provider was paid: every path settles before it answers or raises.
        cost = call.add(reply.input_tokens, reply.output_tokens)
        outcome, readable = self._judge(call, reply, tools is not None, read)
        row = call.ledger_row(
            attempt=attempt,
            outcome=outcome,
            now=now,
            held=held,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost_micros=cost,
            requests=requests,
            latency_s=self.monotonic() - began,
            error_code=None if outcome in ("ok", "unreadable") else ErrorCode.llm_failed.value,
        )
        try:
            await self.ledger.settle(held, row)
        finally:
            # Durable (database or journal): the cost leaves this replica's slice too.
            self.slices.settled(held, cost)
        purpose = call.request.purpose.value
        m = self.metrics
        m.child(m.cost, purpose, call.model).inc(float(usd(cost)))
        m.child(m.tokens, purpose, call.model, "input").inc(reply.input_tokens)
        m.child(m.tokens, purpose, call.model, "output").inc(reply.output_tokens)
        if outcome == "cut":
            budget = call.request.max_output_tokens
            raise ContractError(
                ErrorCode.llm_failed,
                f"the structured reply was cut at max_output_tokens={budget}: the budget was "
                "too small for this output; ask with a larger max_output_tokens",
            )
        if outcome == "error":
            raise ContractError(ErrorCode.llm_failed, "the model's reply could not be read")
        return reply, readable

    @staticmethod
    def _judge(
        call: CallRecord,
        reply: ProviderReply,
        structured: bool,
        read: Callable[[list[dict[str, Any]]], Output],
    ) -> tuple[str, Output]:
        """The ledger outcome of a paid answer and its output; never raises.

        `cut`: a structured reply stopped by max_tokens is never valid (a cut tool call's input
        is partial or `{}`), and asking again with the same budget would be cut again.
        """
        if structured and reply.stop_reason == "max_tokens":
            return "cut", Unreadable("cut at max_tokens")
        if reply.problem is not None:
            log.warning("call %s: reply content unreadable: %s", call.call_id, reply.problem)
            return "error", Unreadable("unreadable")
        try:
            readable = read(reply.content)
        except Exception:
            log.exception("call %s: reply could not be read", call.call_id)
            return "error", Unreadable("unreadable")
        return ("unreadable" if isinstance(readable, Unreadable) else "ok"), readable


def request_shape(req: CompleteRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The messages and the forced tool (structured output) of a request's first attempt."""
    messages: list[dict[str, Any]] = [m.model_dump() for m in req.messages]
    if req.output_schema is None:
        return messages, None
    schema = req.output_schema
    return messages, [forced_tool(schema.name, schema.json_schema, schema.description)]


def attempt_worst_case(
    price: ModelPrice,
    req: CompleteRequest,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> int:
    """Micro-USD an attempt may cost at most: the input bound plus every output token allowed."""
    bound = estimate_input_tokens(req.system, messages, tools)
    return worst_case_micros(price, bound, req.max_output_tokens)
