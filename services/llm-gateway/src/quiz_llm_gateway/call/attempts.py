"""The attempts of one call, each under its own hold (admit, provider, settle).

Refused before any hold: no provider configured (`llm_not_configured`), an invalid output
schema (`invalid_request`), every model of the call's chain with its circuit open, or a
caller's deadline already passed (`llm_failed`). A paid answer is judged (`ok`, `unreadable`,
`cut`, `error`) and settled before the call answers or raises; an unreadable answer is asked
once more with the problem named.

Fallback (issue 31, LLM_FALLBACK_MODELS): when a model fails — its retries on 429/529/5xx,
timeouts or connection errors ran out, or its circuit is open — the next model of the chain
(`domain.fallback.chain`, residency applied) answers under the same call id and request id,
as a new attempt whose hold is checked again at that model's price (refused:
`llm_budget_exhausted`, nothing charged beyond what was spent). The ledger row of each attempt
and the reply's `model` name the model that answered.
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
from quiz_llm_gateway.domain.circuit import Circuits
from quiz_llm_gateway.domain.deadlines import time_left_s
from quiz_llm_gateway.domain.output import (
    InvalidSchema,
    Unreadable,
    cached_validator,
    forced_tool,
    read_json_output,
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
from quiz_llm_gateway.domain.prompt_cache import cacheable, write_premium_micros
from quiz_llm_gateway.domain.providers import unusable
from quiz_llm_gateway.domain.structured import sent_tools
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Held
from quiz_llm_gateway.settlement.ledger import Ledger

log = logging.getLogger(__name__)
Output = dict[str, Any] | str | Unreadable
# A call's readable tries: the first answer and, after an unreadable one, one more.
READABLE_TRIES = 2


class ModelFailed(ContractError):
    """An attempt's model could not answer (settled, nothing paid for it); `fallback`: another
    model may answer in its place."""

    def __init__(self, message: str, retry_after_s: float | None, *, fallback: bool) -> None:
        super().__init__(ErrorCode.llm_failed, message, retry_after_s=retry_after_s)
        self.fallback = fallback


class Attempts:
    """Runs a call's attempts to a reply or a `ContractError`, every paid answer settled."""

    def __init__(
        self,
        provider: ProviderCalls | None,
        circuits: Circuits,
        admissions: Admissions,
        ledger: Ledger,
        slices: CapSlices,
        metrics: GatewayMetrics,
        settings: Settings,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        chain: Callable[[str], tuple[str, ...]] = lambda model: (model,),
        price: Callable[[str], ModelPrice] | None = None,
    ) -> None:
        self.provider = provider
        self.circuits = circuits
        # The models that may answer a call of a model (itself first), and their prices.
        self.chain = chain
        self.price = price
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
        models = self.chain(call.model)
        now_m = self.monotonic()
        ready = [m for m in models if self.circuits.of(m).admits(now_m)]
        if not ready:
            retry = min((self.circuits.of(m).retry_after(now_m) for m in models), default=None)
            await self._refuse(call, ErrorCode.llm_failed)
            raise ContractError(
                ErrorCode.llm_failed, "the provider is failing (circuit open)", retry_after_s=retry
            )
        if ready[0] != call.model:
            # The model's circuit is open: its first fallback with a closed one answers.
            self._switch(call, ready[0])
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
                # The path of the model that answered (a fallback may take the other one).
                if sent_tools(call.model, tools) is None:
                    return read_json_output(content, validator)
                return read_tool_output(content, tools[0]["name"], validator)
            return read_text_output(content)

        attempt = tries = 0
        while True:
            attempt += 1
            try:
                reply, output, used = await self._attempt(
                    call, attempt, messages, tools, deadline, read
                )
            except ModelFailed as e:
                following = self._next_model(call.model, models) if e.fallback else None
                if following is None:
                    raise
                log.warning(
                    "call %s: %s failed (%s), %s answers in its place",
                    call.call_id,
                    call.model,
                    e.message,
                    following,
                )
                self._switch(call, following)
                continue
            if not isinstance(output, Unreadable):
                return CompleteReply(
                    output=output,
                    model=call.model,
                    usage=call.usage(),
                    attempts=attempt,
                    call_id=call.call_id,
                    stop_reason=reply.stop_reason,
                    remaining_usd=self.admissions.remaining_usd(used),
                    remaining_calls=call.calls_left,
                )
            tries += 1
            self.metrics.child(self.metrics.parse_failures, req.purpose.value).inc()
            log.info("call %s attempt %d unreadable: %s", call.call_id, attempt, output.problem)
            if tries >= READABLE_TRIES:
                raise ContractError(ErrorCode.llm_failed, "the model's reply was unreadable twice")
            messages = retry_messages(messages, reply.content, output)

    def _next_model(self, failed: str, models: tuple[str, ...]) -> str | None:
        """The model after `failed` in the chain whose circuit lets a request through now."""
        if failed not in models:
            return None
        now = self.monotonic()
        after = models[models.index(failed) + 1 :]
        return next((m for m in after if self.circuits.of(m).admits(now)), None)

    def _switch(self, call: CallRecord, model: str) -> None:
        """The call goes on with `model` at its own price (its ledger rows and reply name it)."""
        assert self.price is not None, "a fallback needs the gateway's prices"
        call.model = model
        call.price = self.price(model)

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
    ) -> tuple[ProviderReply, Output, int | None]:
        """One readable-or-not answer under its own hold: admit, call (with retries), settle;
        and the day's spent + reserved micro-USD after the settle (`Ledger.settle`, None when
        journaled), the reply's remaining_usd without a read of its own (issue 31 item 6)."""
        assert self.provider is not None
        now = self.clock()
        worst = attempt_worst_case(call.price, call.request, messages, tools, model=call.model)
        refusal = call.ledger_row(attempt=0, outcome="refused", now=now)
        held, calls_left = await self.admissions.admit(
            call.request,
            call.call_id,
            refusal,
            attempt=attempt,
            worst_micros=worst,
            deadline=deadline,
            now=now,
        )
        call.attempts = attempt
        if attempt == 1:
            # The first admission's rate check is the call's (later attempts do not count).
            call.calls_left = calls_left
        began = self.monotonic()
        try:
            reply, requests = await self.provider.call(call, messages, tools, deadline)
            call.requests += requests
        except ProviderFailure as e:
            await self._settle_unpaid(call, attempt, held, e, now, began)
            raise ModelFailed(str(e), e.retry_after_s, fallback=e.fallback) from e
        # From here the provider was paid: every path settles before it answers or raises.
        cost = call.add(
            reply.input_tokens,
            reply.output_tokens,
            reply.cache_read_input_tokens,
            reply.cache_creation_input_tokens,
        )
        outcome, readable = self._judge(call, reply, tools is not None, read)
        row = call.ledger_row(
            attempt=attempt,
            outcome=outcome,
            now=now,
            held=held,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cache_read_input_tokens=reply.cache_read_input_tokens,
            cache_creation_input_tokens=reply.cache_creation_input_tokens,
            cost_micros=cost,
            requests=requests,
            latency_s=self.monotonic() - began,
            error_code=None if outcome in ("ok", "unreadable") else ErrorCode.llm_failed.value,
        )
        try:
            used = await self.ledger.settle(held, row)
        finally:
            # Durable (database or journal): the cost leaves this replica's slice too.
            self.slices.settled(held, cost)
        self._count(call, reply, cost)
        if outcome == "cut":
            budget = call.request.max_output_tokens
            raise ContractError(
                ErrorCode.llm_failed,
                f"the structured reply was cut at max_output_tokens={budget}: the budget was "
                "too small for this output; ask with a larger max_output_tokens",
            )
        if outcome == "error":
            raise ContractError(ErrorCode.llm_failed, "the model's reply could not be read")
        return reply, readable, used

    async def _settle_unpaid(
        self,
        call: CallRecord,
        attempt: int,
        held: Held,
        failure: ProviderFailure,
        now: float,
        began: float,
    ) -> None:
        """Settle an attempt the provider never answered: its hold released, cost 0, the
        requests it made on the ledger row."""
        call.requests += failure.requests
        row = call.ledger_row(
            attempt=attempt,
            outcome="provider_error",
            now=now,
            held=held,
            error_code=ErrorCode.llm_failed.value,
            requests=failure.requests,
            latency_s=self.monotonic() - began,
        )
        try:
            await self.ledger.settle(held, row)
        finally:
            self.slices.settled(held, 0)

    def _count(self, call: CallRecord, reply: ProviderReply, cost: int) -> None:
        """A paid attempt's cost (USD) and tokens, by purpose and model; cache tokens by model."""
        purpose = call.request.purpose.value
        m = self.metrics
        m.child(m.cost, purpose, call.model).inc(float(usd(cost)))
        m.child(m.tokens, purpose, call.model, "input").inc(reply.input_tokens)
        m.child(m.tokens, purpose, call.model, "output").inc(reply.output_tokens)
        if reply.cache_read_input_tokens:
            m.child(m.cache_tokens, call.model, "read").inc(reply.cache_read_input_tokens)
        if reply.cache_creation_input_tokens:
            m.child(m.cache_tokens, call.model, "write").inc(reply.cache_creation_input_tokens)

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
    *,
    model: str,
) -> int:
    """Micro-USD an attempt may cost at most: the input bound plus every output token allowed,
    plus the cache-write premium when `model` gets the stable prefix marked cacheable.

    Never a read discount in advance: every input token is held at the full price, and the
    prefix's bound once more at 0.25 × (a write costs 1.25 ×), marked or not by this replica's
    LLM_GATEWAY_PROMPT_CACHE, so the hold is ≥ any cost the provider can bill (issue 31).
    """
    # The bound counts the forced tool on both structured paths: on the json_schema one the
    # same schema goes out as `output_config.format` (domain.structured), so no fewer bytes.
    bound = estimate_input_tokens(req.system, messages, tools)
    worst = worst_case_micros(price, bound, req.max_output_tokens)
    prefix_tools = sent_tools(model, tools)
    if cacheable(model, req.system, prefix_tools):
        worst += write_premium_micros(price, req.system, prefix_tools)
    return worst
