"""The read side: availability, the day's usage, and the budget gauges (shared by all replicas)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Literal

from quiz_contracts.errors import ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    Purpose,
    PurposeHeld,
    PurposeSpend,
    SpendLine,
    UsageReply,
)
from quiz_llm_gateway.call.retries import CIRCUIT_GAUGE
from quiz_llm_gateway.domain.circuit import Circuits, CircuitState
from quiz_llm_gateway.domain.days import budget_day
from quiz_llm_gateway.domain.pricing import (
    ModelPrice,
    estimate_input_tokens,
    usd,
    worst_case_micros,
)
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import HeldRow, Repository, SpendRow


class Reports:
    """What the gateway tells about itself; reads only."""

    def __init__(
        self,
        repo: Repository,
        metrics: GatewayMetrics,
        circuits: Circuits,
        *,
        models: dict[str, str],
        prices: dict[str, ModelPrice],
        cap_micros: int,
        configured: bool,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
        local_holds: Callable[[date], list[HeldRow]] = lambda _day: [],
        chain: Callable[[str], tuple[str, ...]] = lambda model: (model,),
        providers: dict[str, str] | None = None,
        residency: Literal["any", "local"] = "any",
        usable: Callable[[str], bool] = lambda _model: True,
    ) -> None:
        self.repo = repo
        self.metrics = metrics
        self.circuits = circuits
        self.chain = chain
        self.models = models
        self.prices = prices
        self.cap_micros = cap_micros
        self.configured = configured
        self.clock = clock
        self.monotonic = monotonic
        # This replica's holds against its slice of the cap (in memory, not rows: issue 24).
        self.local_holds = local_holds
        # Issue 31: purpose → who runs its model; LLM_DATA_RESIDENCY; whether a model can be
        # called here (its provider configured, residency allowing it).
        self.providers = providers or {}
        self.residency: Literal["any", "local"] = residency
        self.usable = usable

    def today(self) -> date:
        """The budget day now."""
        return budget_day(datetime.fromtimestamp(self.clock(), UTC))

    async def availability(self, purpose: Purpose | None = None) -> AvailabilityReply:
        """Whether a call can be made now, and which model each purpose uses."""
        models = {p: self.models[p.value] for p in Purpose if purpose is None or p is purpose}
        totals = await self.repo.day_totals(self.today())
        used = (totals.spent_micros + totals.reserved_micros) if totals else 0
        remaining = max(self.cap_micros - used, 0)
        now = self.monotonic()
        state, retry = self._circuit(now, models.values())
        reason: ErrorCode | None = None
        retry_after: float | None = None
        if not self.configured or not any(self.usable(m) for m in models.values()):
            reason = ErrorCode.llm_not_configured
        elif state is CircuitState.open:
            reason = ErrorCode.llm_failed
            retry_after = round(retry, 3)
        elif not self._smallest_call_fits(remaining, models.values()):
            reason = ErrorCode.llm_budget_exhausted
        return AvailabilityReply(
            available=reason is None,
            reason=reason,
            circuit=state.value,
            models=models,
            remaining_usd=usd(remaining),
            retry_after_s=retry_after,
            providers={p: self.providers[p.value] for p in models if p.value in self.providers},
            residency=self.residency,
        )

    def _circuit(self, now: float, models: Iterable[str]) -> tuple[CircuitState, float]:
        """The circuit a purpose's callers meet, one breaker per model (issue 31): a purpose
        is open only when every model of its chain (its model, its fallbacks) is; the reply
        shows the worst purpose asked, and when it is open, how soon one of its models
        probes."""
        order = {CircuitState.closed: 0, CircuitState.half_open: 1, CircuitState.open: 2}
        worst, retry = CircuitState.closed, 0.0
        for model in set(models):
            breakers = [self.circuits.of(m) for m in self.chain(model)]
            state = min((b.current(now) for b in breakers), key=order.__getitem__)
            if order[state] > order[worst]:
                worst = state
            if state is CircuitState.open:
                retry = max(retry, min(b.retry_after(now) for b in breakers))
        return worst, retry

    def _smallest_call_fits(self, remaining_micros: int, models: Iterable[str]) -> bool:
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
        by_purpose = by_purpose_totals(await self.repo.spend(day))
        held = by_purpose_held([*await self.repo.held(day), *self.local_holds(day)])
        payer_spend = None
        if billed_to is not None:
            payer_spend = {
                p: spend.total
                for p, spend in by_purpose_totals(await self.repo.spend(day, billed_to)).items()
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
            held_by_purpose=held,
        )

    async def refresh_gauges(self) -> None:
        """Budget and reservation gauges from the database, the circuit from this replica."""
        totals = await self.repo.day_totals(self.today())
        spent = totals.spent_micros if totals else 0
        reserved = totals.reserved_micros if totals else 0
        self.metrics.budget_spent.set(float(usd(spent)))
        self.metrics.budget_reserved.set(float(usd(reserved)))
        self.metrics.budget_remaining.set(float(usd(max(self.cap_micros - spent - reserved, 0))))
        count, _ = await self.repo.open_reservations()
        self.metrics.reservations_open.set(count)
        self.metrics.circuit_state.set(CIRCUIT_GAUGE[self.circuits.worst(self.monotonic())])


def by_purpose_totals(rows: list[SpendRow]) -> dict[Purpose, PurposeSpend]:
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


def by_purpose_held(rows: list[HeldRow]) -> dict[Purpose, PurposeHeld]:
    """Fold open holds into per-purpose amounts, person and no-person.

    Holds made before migration 0002 have no purpose and are left out (they expire within
    minutes of the upgrade); reserved_usd still counts them.
    """
    micros = {p: [0, 0] for p in Purpose}
    for row in rows:
        if row.purpose is None or row.has_person is None:
            continue
        try:
            slot = micros[Purpose(row.purpose)]
        except ValueError:
            continue
        slot[0 if row.has_person else 1] += row.amount_micros
    return {p: PurposeHeld(person=usd(a), no_person=usd(b)) for p, (a, b) in micros.items()}
