"""The gateway: the flow of one call. Admit (rate, cap), call the provider, settle, reply.

Its collaborators each do one job: the kit's `SingleFlight` (one answer per request_id),
`CallRecord` (the call's totals and ledger rows), `ProviderCalls` (retries, backoff, circuit),
`Ledger` (settle with retries), `Reports` (availability, usage, gauges), `Repository` (every
SQL).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from typing import Any, NoReturn

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    CompleteReply,
    CompleteRequest,
    Purpose,
    UsageReply,
)
from quiz_llm_gateway.calls import CallRecord, new_id
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.circuit import CircuitBreaker
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
    with_snapshots,
    worst_case_micros,
)
from quiz_llm_gateway.domain.slices import SliceSizing
from quiz_llm_gateway.journal import SettleJournal
from quiz_llm_gateway.leases import CapSlices
from quiz_llm_gateway.ledger import Ledger
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.provider import ProviderReply
from quiz_llm_gateway.provider_calls import Provider, ProviderCalls, ProviderFailure
from quiz_llm_gateway.reports import Reports
from quiz_llm_gateway.repository import (
    Admission,
    AdmitArgs,
    Held,
    RateKey,
    Repository,
    is_outage,
)
from quiz_llm_gateway.stream_journal import StreamJournal
from quiz_llm_gateway.writer import AdmitWriter, RateWriter
from quiz_servicekit.singleflight import SingleFlight

log = logging.getLogger(__name__)
# How often a repeat waits on another replica's call of the same request_id.
IDEMPOTENCY_POLL_S = 0.05
Output = dict[str, Any] | str | Unreadable


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
        journal_stream: StreamJournal | None = None,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.metrics = metrics
        self.clock = clock
        self.monotonic = monotonic
        self.models = settings.models()
        self.prices = with_snapshots(
            self.models, {**DEFAULT_PRICES, **parse_prices(settings.model_prices)}
        )
        check_models_priced(self.models, self.prices)
        self.limits = settings.limits()
        self.cap_micros = micros(settings.daily_cap_usd)
        self.circuit = CircuitBreaker(settings.circuit_failures, settings.circuit_cooldown_s)
        self.provider = (
            ProviderCalls(
                provider, settings, metrics, self.circuit, monotonic=monotonic, sleep=sleep
            )
            if provider is not None
            else None
        )
        self.ledger = Ledger(
            repo,
            SettleJournal(settings.journal_dir()),
            settings.settle_timeout_s,
            stream=journal_stream,
            clock=clock,
            pending_gauge=metrics.journal_pending,
            monotonic=monotonic,
        )
        self.reports = Reports(
            repo,
            metrics,
            self.circuit,
            models=self.models,
            prices=self.prices,
            cap_micros=self.cap_micros,
            configured=provider is not None,
            clock=clock,
            monotonic=monotonic,
            local_holds=lambda day: self.slices.held_rows(day),
        )
        self._single = SingleFlight[CompleteReply](settings.idempotency_ttl_s, monotonic)
        # Request ids whose call failed while the database was away (key -> call id): released
        # at the next sweep, not left to expire (deadline + grace) while their callers repeat.
        self._unreleased: dict[str, str] = {}
        self._admissions = AdmitWriter(repo)
        self._rates = RateWriter(repo)
        self.slices = CapSlices(
            repo,
            SliceSizing(
                settings.cap_slice_calls, settings.cap_slice_share, settings.cap_slice_min_calls
            ),
            cap_micros=self.cap_micros,
            ttl_s=settings.cap_slice_ttl_s,
            idle_s=settings.cap_slice_idle_s,
            clock=clock,
        )

    @staticmethod
    def check_settings(settings: Settings) -> None:
        """Raise on a configuration that must not start: unknown purpose, unpriced model."""
        models = settings.models()
        check_models_priced(models, {**DEFAULT_PRICES, **parse_prices(settings.model_prices)})

    # -- complete ------------------------------------------------------------------------------

    async def complete(self, req: CompleteRequest, trace_id: str | None = None) -> CompleteReply:
        """Answer a call once per request_id across replicas: a repeat joins or reuses it.

        Keyed by purpose, payer and request_id (two services choosing the same id never share
        a reply) and checked against the request's digest: the same id with another request
        is `invalid_request`. On this replica a repeat joins the call in hand; across
        replicas the database's `idempotency_keys` row decides who calls and keeps the reply.
        """
        if req.request_id is None:
            return await self._complete(req, trace_id)
        if req.output_schema is not None:
            # Bad input costs nothing: a schema that will be refused takes no idempotency row.
            try:
                cached_validator(req.output_schema.json_schema)
            except InvalidSchema as e:
                raise ContractError(ErrorCode.invalid_request, str(e)) from e
        key = f"{req.purpose.value}:{req.payer}:{req.request_id}"
        digest = request_digest(req)
        return await self._single.run(
            f"{key}#{digest}", lambda: self._complete_once(req, key, digest, trace_id)
        )

    async def _complete_once(
        self, req: CompleteRequest, key: str, digest: str, trace_id: str | None
    ) -> CompleteReply:
        if self.ledger.maybe_pending():
            await self.ledger.catch_up()
        call_id = new_id()
        deadline_s = max(self._time_left_s(req), 0.0)
        waited_until = self.monotonic() + deadline_s
        while True:
            now = self.clock()
            # A claim outlives the call's own hold: a crashed owner's key frees after that.
            until = now + deadline_s + self.settings.reservation_grace_s
            try:
                claim = await self.repo.claim_request(key, digest, call_id, now, until)
            except Exception as e:
                mapped = self._outage(e)
                if mapped is None:
                    raise
                purpose = req.purpose.value
                m = self.metrics
                m.child(m.calls, purpose, self.models[purpose], mapped.code.value).inc()
                raise mapped from e
            if claim.owner:
                break
            if claim.digest is not None and claim.digest != digest:
                raise ContractError(
                    ErrorCode.invalid_request,
                    f"request_id {req.request_id!r} was already used with a different request",
                )
            if claim.reply is not None:
                return CompleteReply.model_validate_json(claim.reply)
            if claim.digest is not None:
                # Another replica is answering it: wait for its reply (or its failure).
                if self.monotonic() >= waited_until:
                    # Not a failure of the call: it may yet be answered and kept; the caller
                    # asks again with the same id later (unavailable: retry, never final).
                    raise ContractError(
                        ErrorCode.unavailable,
                        f"request_id {req.request_id!r} is still being answered elsewhere",
                        retry_after_s=1.0,
                    )
                await asyncio.sleep(IDEMPOTENCY_POLL_S)
        try:
            reply = await self._complete(req, trace_id, call_id)
        except BaseException:
            # Only a success is kept: a failed call may be asked again. When the database is
            # away the release waits for the next sweep (a repeat meanwhile waits or is told
            # `unavailable`): the error stands.
            try:
                await asyncio.shield(self.repo.forget_request(key, call_id))
            except Exception as e:
                self._unreleased[key] = call_id
                log.warning("request %s not released yet (%s)", key, type(e).__name__)
            raise
        # Paid: the reply goes to its caller whatever becomes of this write (the database,
        # else the journal, which any replica replays into idempotency_keys).
        now = self.clock()
        until = now + self.settings.idempotency_ttl_s
        await self.ledger.keep_reply(key, digest, call_id, reply, until, now)
        return reply

    async def _complete(
        self, req: CompleteRequest, trace_id: str | None, call_id: str | None = None
    ) -> CompleteReply:
        model = self.models[req.purpose.value]
        call = CallRecord(
            call_id=call_id or new_id(),
            request=req,
            model=model,
            price=self.prices[model],
            trace_id=trace_id,
            started=self.monotonic(),
        )
        outcome = "ok"
        detail = ""
        try:
            reply = await self._run(call)
        except ContractError as e:
            outcome, detail = e.code.value, e.message
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as e:
            mapped = self._outage(e)
            if mapped is None:
                outcome, detail = "internal", type(e).__name__
                raise
            outcome, detail = ErrorCode.unavailable.value, type(e).__name__
            raise mapped from e
        finally:
            elapsed = self.monotonic() - call.started
            m = self.metrics
            m.child(m.calls, req.purpose.value, model, outcome).inc()
            m.child(m.duration, req.purpose.value).observe(elapsed)
            self._log_call(call, outcome, detail, elapsed)
        return reply

    @staticmethod
    def _log_call(call: CallRecord, outcome: str, detail: str, elapsed_s: float) -> None:
        """One line per call: who asked what it cost and how it went; never the prompt."""
        level = logging.INFO if outcome in ("ok", "invalid_request") else logging.WARNING
        if log.isEnabledFor(level):
            log.log(
                level,
                "llm call purpose=%s model=%s outcome=%s attempts=%d requests=%d "
                "cost_usd=%s input_tokens=%d output_tokens=%d latency_ms=%d call_id=%s%s",
                call.request.purpose.value,
                call.model,
                outcome,
                call.attempts,
                call.requests,
                usd(call.cost_micros),
                call.input_tokens,
                call.output_tokens,
                int(elapsed_s * 1000),
                call.call_id,
                f" detail={detail[:200]!r}" if detail else "",
            )

    async def _run(self, call: CallRecord) -> CompleteReply:
        req = call.request
        if self.provider is None:
            await self._refuse(call, ErrorCode.llm_not_configured)
            raise ContractError(ErrorCode.llm_not_configured, "no LLM provider key is configured")
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
        deadline = call.started + self._time_left_s(req)
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
        held = await self._admit(call, attempt, worst, deadline, now)
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

    async def _admit(
        self, call: CallRecord, attempt: int, worst_micros: int, deadline: float, now: float
    ) -> Held:
        """Hold the attempt's worst case (`worst_micros`) under the cap, or refuse."""
        req = call.request
        await self._know_database()
        day = budget_day(datetime.fromtimestamp(now, UTC))
        remaining = max(deadline - self.monotonic(), 0.0)
        expires_at = now + remaining + self.settings.reservation_grace_s
        # The second attempt is the same call: it does not count against the person twice.
        rate = self._rate_key(req) if attempt == 1 else None
        # The review night reads its calls in flight from their reservation rows
        # (held_by_purpose, ADR-060 §5): its calls keep a row of their own.
        night = req.purpose is Purpose.review and req.user is None
        tag = (req.purpose.value, req.user is not None)
        sliced = None if night else await self.slices.hold(day, worst_micros, expires_at, tag)

        def admit(held: Held | None) -> AdmitArgs:
            return AdmitArgs(
                held=held,
                call_id=call.call_id,
                request_id=req.request_id,
                purpose=req.purpose.value,
                has_person=req.user is not None,
                cap_micros=self.cap_micros,
                now=now,
                expires_at=expires_at,
                rate=rate,
                refusal=call.ledger_row(attempt=0, outcome="refused", now=now),
            )

        if sliced is not None:
            if rate is None:
                return sliced  # no transaction before the provider request
            # The per-person limit stays exact across replicas (docs: Per-person limits): its
            # own short transaction, without the day row, not waiting for a WAL flush.
            try:
                admission = await self._rates.submit(admit(None))
            except BaseException:
                self.slices.dropped(sliced)  # not admitted (database away, cancelled)
                raise
            if admission.admitted:
                return sliced
            self.slices.dropped(sliced)
            self._refused(req, admission)
        held = Held(new_id(), day, worst_micros)
        admission = await self._admissions.submit(admit(held))
        if admission.admitted:
            return held
        self._refused(req, admission)

    def _refused(self, req: CompleteRequest, admission: Admission) -> NoReturn:
        """Raise the refusal of an admission: `rate_limited` with its wait, else the cap."""
        code = ErrorCode(admission.refused or ErrorCode.llm_budget_exhausted)
        if code is ErrorCode.rate_limited:
            raise ContractError(
                code,
                f"more than {self.limits[req.purpose.value]} {req.purpose.value} calls "
                f"per {self.settings.rate_window_s:g} s",
                retry_after_s=round(admission.retry_after_s or 0.0, 3),
            )
        raise ContractError(
            code, f"the daily LLM cap ({usd(self.cap_micros)} USD) cannot cover this call"
        )

    def _time_left_s(self, req: CompleteRequest) -> float:
        """Seconds the caller still waits: its `deadline_s` from now, cut by its absolute
        `deadline_at` (≤ 0 once passed)."""
        left = req.deadline_s or self.settings.default_deadline_s
        if req.deadline_at is not None:
            left = min(left, req.deadline_at.timestamp() - self.clock())
        return left

    def _outage(self, error: Exception) -> ContractError | None:
        """`unavailable` with retry_after_s for a database that cannot be reached (a fault
        that passes, never `internal`); None for any other error."""
        if not is_outage(error):
            return None
        log.warning("database unreachable (%s): answered unavailable", type(error).__name__)
        return ContractError(
            ErrorCode.unavailable,
            "the gateway's database cannot be reached (nothing was charged); try again",
            retry_after_s=self.settings.outage_retry_after_s,
        )

    def _rate_key(self, req: CompleteRequest) -> RateKey | None:
        """Per (person, purpose); scheduled work with nobody to bill has no per-person limit."""
        person = req.user if req.user is not None else req.billed_to
        limit = self.limits.get(req.purpose.value, 0)
        if person is None or limit <= 0:
            return None
        return RateKey(f"{req.purpose.value}:{person}", limit, self.settings.rate_window_s)

    async def _refuse(self, call: CallRecord, code: ErrorCode) -> None:
        """The ledger row of a call refused before any hold."""
        row = call.ledger_row(attempt=0, outcome="refused", now=self.clock(), error_code=code.value)
        await self.ledger.record(row)

    # -- housekeeping and the read side --------------------------------------------------------

    async def close(self) -> None:
        """At stop: wait for settles in hand, a last sweep, release the journal's lock.

        When the database is away the journal keeps its entries for the next start's replay.
        """
        await self.ledger.drain()
        await self.slices.close()
        await self._admissions.close()
        await self._rates.close()
        try:
            await self.sweep()
        except Exception:
            log.warning("final sweep failed; the settle journal is replayed at the next start")
        finally:
            self.ledger.close()

    async def sweep(self) -> None:
        """Replay journaled settles, release expired holds, prune rate events, refresh gauges.

        Journaled settles go first: a hold whose settle is in the journal must not be released
        as expired before its spend is counted (the replay counts both at once).
        """
        try:
            await self._know_database()
        except Exception as e:
            log.warning("database id not read (%s)", type(e).__name__)
        try:
            await self.ledger.retry_unsettled()
        finally:
            # Before the database steps below, which fail while it is away.
            await self.ledger.pending()
        await self._release_claims()
        released = await self.repo.release_expired(self.clock())
        if released:
            log.warning("released %d expired reservation(s)", released)
        returned = await self.repo.release_expired_leases(self.clock())
        if returned:
            log.warning("returned %d expired cap slice(s) (their replica stopped)", returned)
        await self.repo.prune_rate_events(self.clock() - self.settings.rate_window_s)
        await self.repo.prune_requests(self.clock())
        await self.reports.refresh_gauges()

    async def _release_claims(self) -> None:
        """Release the request ids whose failed call could not release them (the database was
        away); the first refusal stops the round, the rest wait for the next sweep."""
        for key, call_id in list(self._unreleased.items()):
            await self.repo.forget_request(key, call_id)
            del self._unreleased[key]
            log.info("request %s released after the outage", key)

    async def _know_database(self) -> None:
        """Read the database's id once: the JetStream journal's subject (one per database)."""
        stream = self.ledger.stream
        if stream is not None and stream.database_id is None:
            stream.database_id = await self.repo.database_id()

    def today(self) -> date:
        """The budget day now."""
        return self.reports.today()

    async def availability(self, purpose: Purpose | None = None) -> AvailabilityReply:
        """Whether a call can be made now, and which model each purpose uses; `unavailable`
        while the database cannot be reached."""
        try:
            return await self.reports.availability(purpose)
        except Exception as e:
            mapped = self._outage(e)
            if mapped is None:
                raise
            raise mapped from e

    def estimate_micros(self, req: CompleteRequest) -> int:
        """The worst case admission would hold for `req`'s first attempt (ADR-060 §5).

        The very function `_attempt` holds with: the purpose's model and price, the prompt's
        byte bound (system, messages, the forced tool) and every allowed output token.
        """
        model = self.models[req.purpose.value]
        messages, tools = request_shape(req)
        return attempt_worst_case(self.prices[model], req, messages, tools)

    async def usage(
        self,
        day: date | None = None,
        billed_to: str | None = None,
        estimate: CompleteRequest | None = None,
    ) -> UsageReply:
        """The day's spend by purpose and by person / no person, open holds, the cap, what is
        left; with `estimate`, the worst case that request would hold (`estimate_usd`)."""
        try:
            reply = await self.reports.usage(day, billed_to)
        except Exception as e:
            mapped = self._outage(e)
            if mapped is None:
                raise
            raise mapped from e
        if estimate is not None:
            reply.estimate_usd = usd(self.estimate_micros(estimate))
        return reply


def request_digest(req: CompleteRequest) -> str:
    """SHA-256 of what the request asks (request_id and the deadlines aside: a retry may carry
    less time left), in a canonical JSON form."""
    body = req.model_dump(mode="json", exclude={"request_id", "deadline_s", "deadline_at"})
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
