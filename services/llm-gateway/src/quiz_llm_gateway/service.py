"""The gateway: the flow of one call, read top-down in `complete`. Authorise, claim the request
id, call (admit, provider, settle), keep the reply.

Its collaborators each do one job, by stage: `RequestIds` (settlement.requests: one answer
per request_id across replicas, on the kit's `SingleFlight`; `claim` is an `async with`),
`Attempts` (call.attempts: hold, provider, settle, judge), `ProviderCalls` (call.retries:
retries, backoff, circuit), `CallRecord` (call.record: the call's totals and ledger rows),
`Admissions` and `CapSlices` (admission: rate and cap, this replica's slices of the cap, or
the refusal), `Ledger` (settlement.ledger: settle, else the journals), `Reports`
(availability, usage, gauges), `Repository` (rows: every SQL, by table).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import date

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    CompleteReply,
    CompleteRequest,
    Purpose,
    UsageReply,
)
from quiz_llm_gateway.admission.admissions import Admissions
from quiz_llm_gateway.call.attempts import Attempts, attempt_worst_case, request_shape
from quiz_llm_gateway.call.provider import Provider
from quiz_llm_gateway.call.record import CallRecord
from quiz_llm_gateway.call.retries import ProviderCalls
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.callers import authorize
from quiz_llm_gateway.domain.circuit import CircuitBreaker, Circuits
from quiz_llm_gateway.domain.fallback import chain, fallback_models, parse_fallbacks
from quiz_llm_gateway.domain.ids import new_id
from quiz_llm_gateway.domain.output import InvalidSchema, cached_validator
from quiz_llm_gateway.domain.pricing import (
    DEFAULT_PRICES,
    ModelPrice,
    PricingError,
    check_models_priced,
    micros,
    parse_prices,
    price_for,
    usd,
    with_snapshots,
)
from quiz_llm_gateway.domain.providers import (
    check_local_models_priced,
    display_name,
    parse_price_pairs,
    provider_kind,
)
from quiz_llm_gateway.domain.share import platform_worst_case_micros
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.reports import Reports
from quiz_llm_gateway.rows import Repository, outage_error
from quiz_llm_gateway.settlement.journal import SettleJournal
from quiz_llm_gateway.settlement.ledger import Ledger
from quiz_llm_gateway.settlement.requests import RequestIds, request_digest
from quiz_llm_gateway.settlement.stream_journal import StreamJournal

log = logging.getLogger(__name__)


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
        # Every model a call may use: the purposes' and their fallbacks' (issue 31), each
        # priced at start (an Anthropic id always is; another provider's needs its own price).
        self.fallbacks = parse_fallbacks(settings.fallback_models)
        callable_models = {**self.models, **{m: m for m in fallback_models(self.fallbacks)}}
        self.prices = with_snapshots(callable_models, configured_prices(settings))
        check_models_priced(callable_models, self.prices)
        self.limits = settings.limits()
        self.cap_micros = micros(settings.daily_cap_usd)
        # One breaker per model (issue 31): a model's outage leaves its fallback callable.
        self.circuits = Circuits(settings.circuit_failures, settings.circuit_cooldown_s)
        self.provider = (
            ProviderCalls(
                provider, settings, metrics, self.circuits, monotonic=monotonic, sleep=sleep
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
        self.reports = self._reports(configured=provider is not None)
        self.requests = RequestIds(
            repo,
            self.ledger,
            settings,
            metrics,
            models=self.models,
            clock=clock,
            monotonic=monotonic,
        )
        self.admissions = Admissions(
            repo,
            self.ledger,
            settings,
            cap_micros=self.cap_micros,
            limits=self.limits,
            clock=clock,
            monotonic=monotonic,
        )
        self.slices = self.admissions.slices
        self.attempts = Attempts(
            self.provider,
            self.circuits,
            self.admissions,
            self.ledger,
            self.slices,
            metrics,
            settings,
            clock=clock,
            monotonic=monotonic,
            chain=self.chain,
            price=self.price,
        )

    def _reports(self, *, configured: bool) -> Reports:
        """The read side (availability, usage, gauges) over this gateway's models and state."""
        return Reports(
            self.repo,
            self.metrics,
            self.circuits,
            models=self.models,
            prices=self.prices,
            cap_micros=self.cap_micros,
            configured=configured,
            chain=self.chain,
            # Issue 31: who runs each purpose's model, the residency, and whether a model can be
            # called here (its provider configured, residency allowing it).
            providers={p: provider_name(self.settings, m) for p, m in self.models.items()},
            residency=self.settings.data_residency,
            usable=lambda model: self.usable(model),
            clock=self.clock,
            monotonic=self.monotonic,
            local_holds=lambda day: self.slices.held_rows(day),
        )

    def chain(self, model: str) -> tuple[str, ...]:
        """The models that may answer a call of `model`, in order (LLM_FALLBACK_MODELS); under
        LLM_DATA_RESIDENCY=local only the local ones (`domain.providers.is_local`), so no
        fallback leaves the school's servers."""
        local_only = self.settings.data_residency == "local"
        return chain(model, self.fallbacks, local_only=local_only)

    def price(self, model: str) -> ModelPrice:
        """`model`'s price (every callable model is priced at start)."""
        found = self.prices.get(model) or price_for(model, self.prices)
        if found is None:
            raise PricingError(f"no price for model {model}")
        return found

    def circuit(self, model: str | None = None) -> CircuitBreaker:
        """The circuit breaker of `model` (default: the generate purpose's model)."""
        return self.circuits.of(model or self.models[Purpose.generate.value])

    @staticmethod
    def check_settings(settings: Settings) -> None:
        """Raise on a configuration that must not start: unknown purpose, unpriced model, a
        fallback table that is not `{model: [model, …]}`."""
        models = settings.models()
        fallbacks = fallback_models(parse_fallbacks(settings.fallback_models))
        check_models_priced({**models, **{m: m for m in fallbacks}}, configured_prices(settings))

    def usable(self, model: str) -> bool:
        """Whether a call to `model` can be made here: its provider configured, and
        LLM_DATA_RESIDENCY allowing it (issue 31)."""
        return self.attempts.unusable("", model) is None

    # -- complete ------------------------------------------------------------------------------

    async def complete(
        self, req: CompleteRequest, trace_id: str | None = None, caller: str | None = None
    ) -> CompleteReply:
        """Answer a call once per request_id across replicas: a repeat joins or reuses it.

        `caller`: the bus user the subject named (None: the operators' plain subject); a
        purpose or payer it may not use is `forbidden` before anything is held (issue 29,
        domain.callers).

        Keyed by purpose, payer and request_id (two services choosing the same id never share
        a reply) and checked against the request's digest: the same id with another request
        is `idempotency_key_reused`. On this replica a repeat joins the call in hand; across
        replicas the database's `idempotency_keys` row decides who calls and keeps the reply
        (settlement.requests).
        """
        try:
            authorize(caller, req.purpose, req.billed_to, req.user)
        except ContractError as e:
            log.warning("refused a call from %s: %s", caller, e.message)
            raise
        if req.request_id is None:
            return await self._call(req, trace_id, new_id())
        if req.output_schema is not None:
            # Bad input costs nothing: a schema that will be refused takes no idempotency row.
            try:
                cached_validator(req.output_schema.json_schema)
            except InvalidSchema as e:
                raise ContractError(ErrorCode.invalid_request, str(e)) from e
        key = f"{req.purpose.value}:{req.payer}:{req.request_id}"
        async with self.requests.claim(req, key, request_digest(req)) as claim:
            if claim.kept is not None:
                return claim.kept
            reply = await self._call(req, trace_id, claim.call_id)
            claim.keep(reply)
        return reply

    async def _call(
        self, req: CompleteRequest, trace_id: str | None, call_id: str
    ) -> CompleteReply:
        """One call's attempts to its reply (call.attempts), counted, timed and logged once."""
        model = self.models[req.purpose.value]
        call = CallRecord(
            call_id=call_id,
            request=req,
            model=model,
            price=self.prices[model],
            trace_id=trace_id,
            started=self.monotonic(),
        )
        outcome = "ok"
        detail = ""
        try:
            reply = await self.attempts.run(call)
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
            # The model that answered (or failed last): a fallback's call is counted under it.
            m.child(m.calls, req.purpose.value, call.model, outcome).inc()
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

    def _outage(self, error: Exception) -> ContractError | None:
        """`unavailable` (retry_after_s) for a database that cannot be reached; else None."""
        return outage_error(error, self.settings.outage_retry_after_s)

    # -- housekeeping and the read side --------------------------------------------------------

    async def close(self) -> None:
        """At stop: wait for settles in hand, a last sweep, release the journal's lock.

        When the database is away the journal keeps its entries for the next start's replay.
        """
        await self.ledger.drain()
        await self.admissions.close()
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
            await self.ledger.know_database()
        except Exception as e:
            log.warning("database id not read (%s)", type(e).__name__)
        try:
            await self.ledger.retry_unsettled()
        finally:
            # Before the database steps below, which fail while it is away.
            await self.ledger.pending()
        await self.requests.release_unreleased()
        released = await self.repo.release_expired(self.clock())
        if released:
            log.warning("released %d expired reservation(s)", released)
        returned = await self.repo.release_expired_leases(self.clock())
        if returned:
            log.warning("returned %d expired cap slice(s) (their replica stopped)", returned)
        await self.repo.prune_rate_events(self.clock() - self.settings.rate_window_s)
        await self.repo.prune_requests(self.clock())
        await self.reports.refresh_gauges()

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

        The very function `Attempts` holds with: the purpose's model and price, the prompt's
        byte bound (system, messages, the forced tool) and every allowed output token.
        """
        model = self.models[req.purpose.value]
        messages, tools = request_shape(req)
        return attempt_worst_case(self.prices[model], req, messages, tools, model=model)

    async def usage(
        self,
        day: date | None = None,
        billed_to: str | None = None,
        estimate: CompleteRequest | None = None,
        prompt_chars: int | None = None,
    ) -> UsageReply:
        """The day's spend by purpose and by person / no person, open holds, the cap, what is
        left; with `estimate`, the worst case that request would hold (`estimate_usd`), and
        with `prompt_chars` too, its worst case as the platform's night computes it
        (`share_estimate_usd`, FACTS E)."""
        try:
            reply = await self.reports.usage(day, billed_to)
        except Exception as e:
            mapped = self._outage(e)
            if mapped is None:
                raise
            raise mapped from e
        if estimate is not None:
            reply.estimate_usd = usd(self.estimate_micros(estimate))
            if prompt_chars is not None:
                reply.share_estimate_usd = usd(self.share_estimate_micros(estimate, prompt_chars))
        return reply

    def share_estimate_micros(self, req: CompleteRequest, prompt_chars: int) -> int:
        """The platform's worst case of `req` (FACTS E, where the platform decides: the
        night's share): ceil(prompt_chars / 3) input tokens and `max_output_tokens` output
        tokens at the purpose's model's price (a dated variant at its model's, an unknown
        Anthropic id at the dearest)."""
        model = self.models[req.purpose.value]
        return platform_worst_case_micros(self.price(model), prompt_chars, req.max_output_tokens)


def configured_prices(settings: Settings) -> dict[str, ModelPrice]:
    """The built-in prices, MODEL_PRICES over them, LLM_MODEL_PRICES last (issue 31).

    PricingError when LLM_MODEL_PRICES is malformed or an `openai-compat/` model a call may use
    (a purpose's, or a fallback's) has a price in neither setting (a self-hosted model has no
    list price to fall back on).
    """
    explicit = {
        **parse_prices(settings.model_prices),
        **parse_price_pairs(settings.llm_model_prices),
    }
    fallbacks = fallback_models(parse_fallbacks(settings.fallback_models))
    check_local_models_priced({**settings.models(), **{m: m for m in fallbacks}}, explicit)
    return {**DEFAULT_PRICES, **explicit}


def provider_name(settings: Settings, model: str) -> str:
    """Who runs `model`, as pages name it: Anthropic, or the self-hosted server's name."""
    return display_name(
        provider_kind(model),
        settings.openai_compat_base_url,
        settings.openai_compat_provider_name,
    )
