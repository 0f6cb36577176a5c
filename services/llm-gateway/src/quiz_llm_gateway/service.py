"""The gateway: admit (rate, cap), call the provider with retries and circuit, settle, attribute."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Protocol

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    CompleteReply,
    CompleteRequest,
    Purpose,
    PurposeSpend,
    SpendLine,
    Usage,
    UsageReply,
)
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.circuit import CircuitBreaker, CircuitState
from quiz_llm_gateway.domain.days import budget_day
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
    DEFAULT_PRICES,
    ModelPrice,
    check_models_priced,
    estimate_input_tokens,
    micros,
    parse_prices,
    usd,
    worst_case_micros,
)
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.provider import ProviderError, ProviderReply
from quiz_llm_gateway.repository import Held, RateKey, Repository, SpendRow

log = logging.getLogger(__name__)

CIRCUIT_GAUGE = {CircuitState.closed: 0, CircuitState.half_open: 1, CircuitState.open: 2}
SETTLE_RETRIES = 5


class Provider(Protocol):
    """What the gateway needs of a provider client (the real one, or a test double)."""

    async def create(
        self,
        *,
        model: str,
        system: str | None,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        timeout_s: float,
        purpose: str,
    ) -> ProviderReply: ...


class ProviderFailure(Exception):
    """The provider could not answer within the retries and the deadline."""

    def __init__(self, message: str, requests: int, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.requests = requests
        self.retry_after_s = retry_after_s


@dataclass(slots=True)
class _Call:
    """The running totals of one complete() call."""

    call_id: str
    request: CompleteRequest
    model: str
    price: ModelPrice
    trace_id: str | None
    started: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0


class Gateway:
    """Every LLM call of every service: one instance per replica."""

    def __init__(
        self,
        settings: Settings,
        repo: Repository,
        provider: Provider | None,
        metrics: GatewayMetrics,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.provider = provider
        self.metrics = metrics
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.models = settings.models()
        self.prices = {**DEFAULT_PRICES, **parse_prices(settings.model_prices)}
        check_models_priced(self.models, self.prices)
        self.limits = settings.limits()
        self.cap_micros = micros(settings.daily_cap_usd)
        self.circuit = CircuitBreaker(settings.circuit_failures, settings.circuit_cooldown_s)
        self.in_flight = asyncio.Semaphore(settings.max_in_flight)
        self._recent: dict[str, tuple[float, asyncio.Future[CompleteReply]]] = {}
        self._unsettled: list[tuple[Held | None, dict[str, Any]]] = []

    @staticmethod
    def check_settings(settings: Settings) -> None:
        """Raise on a configuration that must not start: unknown purpose, unpriced model."""
        models = settings.models()
        check_models_priced(models, {**DEFAULT_PRICES, **parse_prices(settings.model_prices)})

    # -- complete ------------------------------------------------------------------------------

    async def complete(self, req: CompleteRequest, trace_id: str | None = None) -> CompleteReply:
        """Answer a call once per request_id on this replica: a repeat joins or reuses it."""
        if req.request_id is None:
            return await self._complete(req, trace_id)
        # Scoped by purpose and payer: two services choosing the same id never share a reply.
        key = f"{req.purpose.value}:{req.payer}:{req.request_id}"
        now = self.monotonic()
        if len(self._recent) > 10_000:
            self._recent = {k: v for k, v in self._recent.items() if v[0] > now}
        known = self._recent.get(key)
        if known is not None and known[0] > now:
            return await asyncio.shield(known[1])
        future: asyncio.Future[CompleteReply] = asyncio.get_running_loop().create_future()
        self._recent[key] = (now + self.settings.idempotency_ttl_s, future)
        try:
            reply = await self._complete(req, trace_id)
        except BaseException as e:
            # Only a success is remembered: a failed call may be asked again.
            self._recent.pop(key, None)
            if isinstance(e, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(e)
                future.exception()  # retrieved: no "never retrieved" warning
            raise
        future.set_result(reply)
        return reply

    async def _complete(self, req: CompleteRequest, trace_id: str | None) -> CompleteReply:
        model = self.models[req.purpose.value]
        call = _Call(
            call_id=str(uuid.uuid4()),
            request=req,
            model=model,
            price=self.prices[model],
            trace_id=trace_id,
            started=self.monotonic(),
        )
        outcome = "ok"
        try:
            reply = await self._run(call)
        except ContractError as e:
            outcome = e.code.value
            raise
        finally:
            self.metrics.calls.labels(req.purpose.value, model, outcome).inc()
            self.metrics.duration.labels(req.purpose.value).observe(self.monotonic() - call.started)
        return reply

    async def _run(self, call: _Call) -> CompleteReply:
        req = call.request
        if self.provider is None:
            await self._record_refusal(call, ErrorCode.llm_not_configured)
            raise ContractError(ErrorCode.llm_not_configured, "no LLM provider key is configured")
        tools: list[dict[str, Any]] | None = None
        validator = None
        if req.output_schema is not None:
            try:
                validator = cached_validator(req.output_schema.json_schema)
            except InvalidSchema as e:
                raise ContractError(ErrorCode.invalid_request, str(e)) from e
            tools = [
                forced_tool(
                    req.output_schema.name,
                    req.output_schema.json_schema,
                    req.output_schema.description,
                )
            ]
        if not self.circuit.admits(self.monotonic()):
            retry = self.circuit.retry_after(self.monotonic())
            await self._record_refusal(call, ErrorCode.llm_failed)
            raise ContractError(
                ErrorCode.llm_failed, "the provider is failing (circuit open)", retry_after_s=retry
            )
        deadline = call.started + (req.deadline_s or self.settings.default_deadline_s)
        messages: list[dict[str, Any]] = [m.model_dump() for m in req.messages]

        def read(content: list[dict[str, Any]]) -> dict[str, Any] | str | Unreadable:
            if tools is not None and validator is not None:
                return read_tool_output(content, tools[0]["name"], validator)
            return read_text_output(content)

        for attempt in (1, 2):
            reply, output = await self._attempt(call, attempt, messages, tools, deadline, read)
            if not isinstance(output, Unreadable):
                return CompleteReply(
                    output=output,
                    model=call.model,
                    usage=Usage(
                        input_tokens=call.input_tokens,
                        output_tokens=call.output_tokens,
                        cost_usd=usd(call.cost_micros),
                    ),
                    attempts=attempt,
                    call_id=call.call_id,
                )
            self.metrics.parse_failures.labels(req.purpose.value).inc()
            log.info("call %s attempt %d unreadable: %s", call.call_id, attempt, output.problem)
            messages = retry_messages(messages, reply.content, output)
        raise ContractError(ErrorCode.llm_failed, "the model's reply was unreadable twice")

    async def _attempt(
        self,
        call: _Call,
        attempt: int,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        deadline: float,
        read: Callable[[list[dict[str, Any]]], dict[str, Any] | str | Unreadable],
    ) -> tuple[ProviderReply, dict[str, Any] | str | Unreadable]:
        """One readable-or-not answer under its own hold: admit, call (with retries), settle."""
        req = call.request
        now = self.clock()
        bound = estimate_input_tokens(req.system, messages, tools)
        held = Held(
            str(uuid.uuid4()),
            budget_day(datetime.fromtimestamp(now, UTC)),
            worst_case_micros(call.price, bound, req.max_output_tokens),
        )
        remaining = max(deadline - self.monotonic(), 0.0)
        admission = await self.repo.admit(
            held=held,
            call_id=call.call_id,
            request_id=req.request_id,
            cap_micros=self.cap_micros,
            now=now,
            expires_at=now + remaining + self.settings.reservation_grace_s,
            # The second attempt is the same call: it does not count against the person twice.
            rate=self._rate_key(req) if attempt == 1 else None,
            refusal=self._entry(call, attempt=0, outcome="refused", now=now),
        )
        if not admission.admitted:
            code = ErrorCode(admission.refused or ErrorCode.llm_budget_exhausted)
            if code is ErrorCode.rate_limited:
                raise ContractError(
                    code,
                    f"more than {self.limits[req.purpose.value]} {req.purpose.value} calls "
                    f"per {self.settings.rate_window_s:g} s",
                    retry_after_s=round(admission.retry_after_s or 0.0, 3),
                )
            raise ContractError(
                code,
                f"the daily LLM cap ({usd(self.cap_micros)} USD) cannot cover this call",
            )
        began = self.monotonic()
        try:
            reply, requests = await self._call_provider(call, messages, tools, deadline)
        except ProviderFailure as e:
            await self._settle(
                held,
                self._entry(
                    call,
                    attempt=attempt,
                    outcome="provider_error",
                    now=now,
                    held=held,
                    error_code=ErrorCode.llm_failed.value,
                    requests=e.requests,
                    latency_s=self.monotonic() - began,
                ),
            )
            raise ContractError(ErrorCode.llm_failed, str(e), retry_after_s=e.retry_after_s) from e
        cost = call.price.cost_micros(reply.input_tokens, reply.output_tokens)
        call.input_tokens += reply.input_tokens
        call.output_tokens += reply.output_tokens
        call.cost_micros += cost
        readable = read(reply.content)
        await self._settle(
            held,
            self._entry(
                call,
                attempt=attempt,
                outcome="unreadable" if isinstance(readable, Unreadable) else "ok",
                now=now,
                held=held,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cost_micros=cost,
                requests=requests,
                latency_s=self.monotonic() - began,
            ),
        )
        self.metrics.cost.labels(req.purpose.value, call.model).inc(float(usd(cost)))
        self.metrics.tokens.labels(req.purpose.value, call.model, "input").inc(reply.input_tokens)
        self.metrics.tokens.labels(req.purpose.value, call.model, "output").inc(reply.output_tokens)
        return reply, readable

    async def _call_provider(
        self,
        call: _Call,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        deadline: float,
    ) -> tuple[ProviderReply, int]:
        """Bounded retries with backoff on 429/529/5xx/timeouts, within the deadline and circuit."""
        assert self.provider is not None
        requests = 0
        while True:
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                raise ProviderFailure("the caller's deadline passed", requests)
            if not self.circuit.allow(self.monotonic()):
                raise ProviderFailure(
                    "the provider is failing (circuit open)",
                    requests,
                    self.circuit.retry_after(self.monotonic()),
                )
            requests += 1
            try:
                async with asyncio.timeout(remaining):
                    async with self.in_flight:
                        self.metrics.provider_in_flight.inc()
                        try:
                            reply = await self.provider.create(
                                model=call.model,
                                system=call.request.system,
                                messages=messages,
                                tools=tools,
                                max_tokens=call.request.max_output_tokens,
                                timeout_s=min(remaining, self.settings.provider_timeout_s),
                                purpose=call.request.purpose.value,
                            )
                        finally:
                            self.metrics.provider_in_flight.dec()
            except TimeoutError:
                self.circuit.release_probe()
                self.metrics.provider_requests.labels(call.model, "deadline").inc()
                raise ProviderFailure("the caller's deadline passed", requests) from None
            except ProviderError as e:
                self.metrics.provider_requests.labels(call.model, e.kind).inc()
                if e.kind == "timeout" and remaining < self.settings.provider_timeout_s:
                    # Cut by the caller's deadline, not by a provider outage.
                    self.circuit.release_probe()
                    raise ProviderFailure("the caller's deadline passed", requests) from e
                if e.outage:
                    self.circuit.record_failure(self.monotonic())
                else:
                    self.circuit.record_success()
                self._circuit_gauge()
                if not e.retryable or requests > self.settings.provider_max_retries:
                    raise ProviderFailure(f"provider error {e}", requests) from e
                delay = self._backoff(requests, e.retry_after_s)
                if self.monotonic() + delay >= deadline:
                    raise ProviderFailure(
                        f"provider error {e}; no time left to retry", requests, e.retry_after_s
                    ) from e
                await self.sleep(delay)
                continue
            self.metrics.provider_requests.labels(call.model, "ok").inc()
            self.circuit.record_success()
            self._circuit_gauge()
            return reply, requests

    def _backoff(self, retry: int, retry_after_s: float | None) -> float:
        """The provider's retry-after when given, else capped exponential backoff, jittered."""
        if retry_after_s is not None:
            return min(retry_after_s, self.settings.backoff_max_s * 4)
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2 ** (retry - 1))
        return ceiling * (0.5 + random.random() / 2)

    def _rate_key(self, req: CompleteRequest) -> RateKey | None:
        """Per (person, purpose); scheduled work with nobody to bill has no per-person limit."""
        person = req.user if req.user is not None else req.billed_to
        limit = self.limits.get(req.purpose.value, 0)
        if person is None or limit <= 0:
            return None
        return RateKey(f"{req.purpose.value}:{person}", limit, self.settings.rate_window_s)

    def _entry(
        self,
        call: _Call,
        *,
        attempt: int,
        outcome: str,
        now: float,
        held: Held | None = None,
        error_code: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_micros: int = 0,
        requests: int = 0,
        latency_s: float = 0.0,
    ) -> dict[str, Any]:
        """A ledger row; prompt text is never part of it (data minimisation)."""
        req = call.request
        at = datetime.fromtimestamp(now, UTC)
        return {
            "at": at,
            "day": held.day if held is not None else budget_day(at),
            "call_id": call.call_id,
            "attempt": attempt,
            "purpose": req.purpose.value,
            "person": req.user,
            "billed_to": req.payer,
            "model": call.model,
            "effort": req.effort.value,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_micros": cost_micros,
            "reserved_micros": held.amount_micros if held is not None else 0,
            "outcome": outcome,
            "error_code": error_code,
            "provider_requests": requests,
            "latency_ms": int(latency_s * 1000),
            "request_id": req.request_id,
            "trace_id": call.trace_id,
        }

    async def _record_refusal(self, call: _Call, code: ErrorCode) -> None:
        entry = self._entry(call, attempt=0, outcome="refused", now=self.clock())
        entry["error_code"] = code.value
        await self._settle(None, entry)

    async def _settle(self, held: Held | None, entry: dict[str, Any]) -> None:
        """Settle with retries; a write that keeps failing is kept and retried by the sweep."""
        for attempt in range(SETTLE_RETRIES):
            try:
                # Shielded: a cancelled caller must not lose the spend record half-way.
                await asyncio.shield(self.repo.settle(held, entry))
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("settle of call %s failed (try %d)", entry["call_id"], attempt + 1)
                await self.sleep(min(0.05 * 2**attempt, 1.0))
        log.error("settle of call %s kept failing; queued for the sweep", entry["call_id"])
        self._unsettled.append((held, entry))

    def _circuit_gauge(self) -> None:
        self.metrics.circuit_state.set(CIRCUIT_GAUGE[self.circuit.current(self.monotonic())])

    # -- housekeeping --------------------------------------------------------------------------

    async def sweep(self) -> None:
        """Release expired holds, retry unsettled writes, refresh the budget gauges."""
        pending, self._unsettled = self._unsettled, []
        for held, entry in pending:
            try:
                await self.repo.settle(held, entry)
            except Exception:
                log.warning("settle of call %s still failing", entry["call_id"])
                self._unsettled.append((held, entry))
        released = await self.repo.release_expired(self.clock())
        if released:
            log.warning("released %d expired reservation(s)", released)
        await self.repo.prune_rate_events(self.clock() - self.settings.rate_window_s)
        await self.refresh_gauges()

    async def refresh_gauges(self) -> None:
        """Budget and reservation gauges from the database (shared by all replicas)."""
        day = self.today()
        totals = await self.repo.day_totals(day)
        spent = totals.spent_micros if totals else 0
        reserved = totals.reserved_micros if totals else 0
        self.metrics.budget_spent.set(float(usd(spent)))
        self.metrics.budget_reserved.set(float(usd(reserved)))
        self.metrics.budget_remaining.set(float(usd(max(self.cap_micros - spent - reserved, 0))))
        count, _ = await self.repo.open_reservations()
        self.metrics.reservations_open.set(count)
        self._circuit_gauge()

    def today(self) -> date:
        """The budget day now."""
        return budget_day(datetime.fromtimestamp(self.clock(), UTC))

    # -- availability and usage ----------------------------------------------------------------

    async def availability(self, purpose: Purpose | None = None) -> AvailabilityReply:
        """Whether a call can be made now, and which model each purpose uses."""
        models = {p: self.models[p.value] for p in Purpose if purpose is None or p is purpose}
        totals = await self.repo.day_totals(self.today())
        used = (totals.spent_micros + totals.reserved_micros) if totals else 0
        remaining = max(self.cap_micros - used, 0)
        now = self.monotonic()
        state = self.circuit.current(now)
        reason: ErrorCode | None = None
        retry_after: float | None = None
        if self.provider is None:
            reason = ErrorCode.llm_not_configured
        elif state is CircuitState.open:
            reason = ErrorCode.llm_failed
            retry_after = round(self.circuit.retry_after(now), 3)
        elif not self._smallest_call_fits(remaining, models.values()):
            reason = ErrorCode.llm_budget_exhausted
        return AvailabilityReply(
            available=reason is None,
            reason=reason,
            circuit=state.value,
            models=models,
            remaining_usd=usd(remaining),
            retry_after_s=retry_after,
        )

    def _smallest_call_fits(self, remaining_micros: int, models: Any) -> bool:
        # A cap with less left than a one-token call can never admit anything.
        return any(
            worst_case_micros(self.prices[m], estimate_input_tokens(None, [], None), 1)
            <= remaining_micros
            for m in models
        )

    async def usage(self, day: date | None = None, billed_to: str | None = None) -> UsageReply:
        """The day's spend by purpose and by person / no person, the cap and what is left."""
        day = day or self.today()
        totals = await self.repo.day_totals(day)
        spent = totals.spent_micros if totals else 0
        reserved = totals.reserved_micros if totals else 0
        by_purpose = _by_purpose(await self.repo.spend(day))
        payer_spend = None
        if billed_to is not None:
            payer_spend = {
                p: spend.total
                for p, spend in _by_purpose(await self.repo.spend(day, billed_to)).items()
            }
        return UsageReply(
            day=day,
            cap_usd=usd(self.cap_micros),
            spent_usd=usd(spent),
            reserved_usd=usd(reserved),
            remaining_usd=usd(max(self.cap_micros - spent - reserved, 0)),
            by_purpose=by_purpose,
            billed_to=billed_to,
            billed_to_spend=payer_spend,
        )


def _by_purpose(rows: list[SpendRow]) -> dict[Purpose, PurposeSpend]:
    """Fold ledger slices into per-purpose totals, person and no-person."""
    result = {p: PurposeSpend() for p in Purpose}
    for row in rows:
        try:
            spend = result[Purpose(row.purpose)]
        except ValueError:
            continue
        line = SpendLine(
            calls=row.calls,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cost_usd=usd(row.cost_micros),
        )
        target = spend.person if row.has_person else spend.no_person
        for into in (target, spend.total):
            into.calls += line.calls
            into.input_tokens += line.input_tokens
            into.output_tokens += line.output_tokens
            into.cost_usd = Decimal(into.cost_usd) + Decimal(line.cost_usd)
    return result
