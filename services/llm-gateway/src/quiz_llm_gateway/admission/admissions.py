"""Admission of one attempt: the per-person rate, then a hold under the day's cap, or a refusal.

A hold comes from this replica's slice of the cap (`leases.py`) when it covers the attempt,
its rate checked in a short transaction of its own (`RateWriter`); else the attempt is admitted
on its own in the database (`AdmitWriter`: rate, hold on the day row, or the refusal's ledger
row). A refusal raises `rate_limited` (with its wait) or `llm_budget_exhausted`.

The teacher assistant's share of the cap (LLM_ASSISTANT_SHARE, ADR-080 §4, FACTS E2) is
checked first, for its calls alone (`assist`, `assistant`): its refusal is
`llm_budget_exhausted` and writes nothing (`domain.share.assistant_share_allows`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import NoReturn

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import ASSISTANT_PURPOSES, CompleteRequest, Purpose
from quiz_llm_gateway.admission.leases import CapSlices
from quiz_llm_gateway.admission.writers import AdmitWriter, RateWriter
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.days import budget_day
from quiz_llm_gateway.domain.ids import new_id
from quiz_llm_gateway.domain.pricing import usd
from quiz_llm_gateway.domain.share import assistant_share_allows
from quiz_llm_gateway.domain.slices import SliceSizing
from quiz_llm_gateway.rows import Admission, AdmitArgs, Held, LedgerRow, RateKey, Repository
from quiz_llm_gateway.settlement.ledger import Ledger


class Admissions:
    """Holds attempts' worst cases under the cap and the per-person limits, or refuses them."""

    def __init__(
        self,
        repo: Repository,
        ledger: Ledger,
        settings: Settings,
        *,
        cap_micros: int,
        limits: dict[str, int],
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.ledger = ledger
        self.repo = repo
        # This replica's slices of the cap (issue 24): a hold comes from them when they cover it.
        self.slices = CapSlices(
            repo,
            SliceSizing(
                settings.cap_slice_calls, settings.cap_slice_share, settings.cap_slice_min_calls
            ),
            cap_micros=cap_micros,
            ttl_s=settings.cap_slice_ttl_s,
            idle_s=settings.cap_slice_idle_s,
            clock=clock,
        )
        self.cap_micros = cap_micros
        self.limits = limits
        self.settings = settings
        self.clock = clock
        self.monotonic = monotonic
        self._admissions = AdmitWriter(repo)
        self._rates = RateWriter(repo)

    async def admit(
        self,
        req: CompleteRequest,
        call_id: str,
        refusal: LedgerRow,
        *,
        attempt: int,
        worst_micros: int,
        deadline: float,
        now: float,
    ) -> tuple[Held, int | None]:
        """Hold the attempt's worst case (`worst_micros`) under the cap, or refuse.

        `refusal`: the call's ledger row should it be refused (attempt 0, outcome `refused`;
        the error code is the refusal's). `deadline`: monotonic seconds. Returns the hold and,
        when this attempt's rate was checked (attempt 1 with a per-person limit), the person's
        calls left for the purpose in the window after this one (issue 31 item 6: from the
        check's own count, no read of its own); else None.
        """
        await self.ledger.know_database()
        day = budget_day(datetime.fromtimestamp(now, UTC))
        share = self.settings.assistant_share
        if share is not None and req.purpose in ASSISTANT_PURPOSES:
            await self._within_assistant_share(day, worst_micros, share)
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
                call_id=call_id,
                request_id=req.request_id,
                purpose=req.purpose.value,
                has_person=req.user is not None,
                cap_micros=self.cap_micros,
                now=now,
                expires_at=expires_at,
                rate=rate,
                refusal=refusal,
            )

        if sliced is not None:
            if rate is None:
                return sliced, None  # no transaction before the provider request
            # The per-person limit stays exact across replicas (docs: Per-person limits): its
            # own short transaction, without the day row, not waiting for a WAL flush.
            try:
                admission = await self._rates.submit(admit(None))
            except BaseException:
                self.slices.dropped(sliced)  # not admitted (database away, cancelled)
                raise
            if admission.admitted:
                return sliced, calls_left(rate, admission)
            self.slices.dropped(sliced)
            self._refused(req, admission)
        held = Held(new_id(), day, worst_micros)
        admission = await self._admissions.submit(admit(held))
        if admission.admitted:
            return held, calls_left(rate, admission)
        self._refused(req, admission)

    async def _within_assistant_share(self, day: date, worst_micros: int, share: Decimal) -> None:
        """Raise `llm_budget_exhausted` (no row written: the cap itself was not reached) when
        the assistant's share does not let this attempt's worst case through.

        Its spend today is both its names' ledger cost plus their open holds (rows, and this
        replica's slice holds); the day's total is the day row's spent + reserved (slices
        leased whole). Read before the hold, not inside its transaction: two assistant calls
        racing may both pass by one worst case each — the cap's own check stays exact.
        """
        names = {p.value for p in ASSISTANT_PURPOSES}
        totals = await self.repo.day_totals(day)
        spent = sum(r.cost_micros for r in await self.repo.spend(day) if r.purpose in names)
        held = sum(
            h.amount_micros
            for h in [*await self.repo.held(day), *self.slices.held_rows(day)]
            if h.purpose in names
        )
        day_total = (totals.spent_micros + totals.reserved_micros) if totals else 0
        if not assistant_share_allows(
            assistant_spent_micros=spent + held,
            day_total_micros=day_total,
            worst_micros=worst_micros,
            cap_micros=self.cap_micros,
            share=share,
        ):
            raise ContractError(
                ErrorCode.llm_budget_exhausted,
                f"the assistant's share of today's cap ({share} × {usd(self.cap_micros)} USD, "
                "LLM_ASSISTANT_SHARE) cannot cover this call",
            )

    def remaining_usd(self, used_micros: int | None) -> Decimal | None:
        """The reply's remaining_usd (issue 31 item 6): cap − spent − held, from the day's
        spent + reserved as its settle statement returned it (`Ledger.settle`) — a snapshot at
        the settle: what every replica had committed on the day row before it, and this call.
        Holds include this and other replicas' slices of the cap, leased whole. None when the
        settle was journaled or a journal still holds writes the database did not take (its
        day row understates the spend): a paid reply never waits for its quota."""
        if used_micros is None or self.ledger.maybe_pending():
            return None
        return usd(max(self.cap_micros - used_micros, 0))

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

    def _rate_key(self, req: CompleteRequest) -> RateKey | None:
        """Per (person, purpose); scheduled work with nobody to bill has no per-person limit."""
        person = req.user if req.user is not None else req.billed_to
        limit = self.limits.get(req.purpose.value, 0)
        if person is None or limit <= 0:
            return None
        return RateKey(f"{req.purpose.value}:{person}", limit, self.settings.rate_window_s)

    async def refuse(self, row: LedgerRow) -> None:
        """Write the ledger row of a call refused before any hold (cost 0)."""
        await self.ledger.record(row)

    async def close(self) -> None:
        """At stop: return the slices, stop the admission and rate writers (writes still in
        hand fail, cancelled)."""
        await self.slices.close()
        await self._admissions.close()
        await self._rates.close()


def calls_left(rate: RateKey | None, admission: Admission) -> int | None:
    """The person's calls left in the window after this admitted one: its limit − the calls
    its rate check counted before it − 1 (None without a check)."""
    if rate is None or admission.counted is None:
        return None
    return max(rate.limit - admission.counted - 1, 0)
