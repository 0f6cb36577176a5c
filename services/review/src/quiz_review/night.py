"""The night (ADR-060 §3): the hourly task `llm.review`, within its share of the day's cap.

Inside the Zurich window, under the lease, newest candidate first, one call at a time, and
before EACH call the gateway is asked (`llm.v1.usage` with the next call as `estimate` and its
prompt's size as the platform counts it, `prompt_chars`) for today's no-person review spend,
its in-flight holds and the worst case of that call as the platform computes it (FACTS E,
`share_estimate_usd`; a gateway that gives none: its own hold, `estimate_usd`), so the night
stops before its share of the cap is crossed, deciding as the platform decides. The rules are
`domain/night.py`'s; this module runs them against the repository, the gateway and the lease.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from quiz_contracts.errors import ContractError
from quiz_contracts.llm import CompleteRequest, Purpose, UsageReply
from quiz_contracts.review import ReviewState
from quiz_review.config import Settings
from quiz_review.domain.call_ids import night_call_id
from quiz_review.domain.night import (
    ZURICH,
    is_review_night,
    night_candidates,
    night_share_usd,
    share_allows,
)
from quiz_review.domain.prompt import platform_prompt_chars
from quiz_review.metrics import ReviewMetrics
from quiz_review.repository import ReviewRepository
from quiz_review.reviewer import Clock, Reviewer
from quiz_servicekit.lease import KvLease
from quiz_servicekit.llm import LlmClient, LlmNotAnswered

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NightRun:
    """What one hourly run did: reviews made, and why it ended."""

    outcome: str  # outside_window, lease_held, done, share_spent, no_estimate, or a stop code
    reviewed: int = 0
    failed: int = 0
    candidates: int = 0


@dataclass(frozen=True, slots=True)
class NightBudget:
    """The figures one share check used (all USD, exact)."""

    cap_usd: Decimal
    share_usd: Decimal
    spent_usd: Decimal
    next_usd: Decimal | None


class ReviewNight:
    """One hourly run at a time: the candidates, the share check before each call, the calls."""

    def __init__(
        self,
        *,
        repo: ReviewRepository,
        llm: LlmClient,
        reviewer: Reviewer,
        settings: Settings,
        metrics: ReviewMetrics,
        lease: KvLease | None,
        clock: Clock,
    ) -> None:
        self.repo = repo
        self._llm = llm
        self._reviewer = reviewer
        self._settings = settings
        self._metrics = metrics
        self._lease = lease
        self._clock = clock
        # The last share check of the night (for logs and the bench).
        self.last_budget: NightBudget | None = None

    async def run(self) -> NightRun:
        """One hourly run of the task `llm.review` (see the module docstring)."""
        now = self._clock()
        if not is_review_night(now):
            return self._ended(NightRun("outside_window"))
        if self._lease is None:
            return self._ended(await self._night(now))
        ran, result = await self._lease.run_exclusive(lambda: self._night(now))
        if not ran or result is None:
            log.info("the night runs on another replica")
            return self._ended(NightRun("lease_held"))
        return self._ended(result)

    def _ended(self, run: NightRun) -> NightRun:
        self._metrics.night_runs.labels(run.outcome).inc()
        if run.outcome != "outside_window":
            log.info(
                "night run: %s (%d reviewed, %d failed, %d candidates)",
                run.outcome,
                run.reviewed,
                run.failed,
                run.candidates,
            )
        return run

    async def _night(self, now: datetime) -> NightRun:
        rows = await self.repo.night_rows()
        pools = await self.repo.opted_in_pools()
        candidates = night_candidates(rows, pools, now, self._settings.night_batch)
        day = now.astimezone(ZURICH).date().isoformat()
        reviewed = failed = 0
        for row in candidates:
            if self._lease is not None and not self._lease.held:
                return NightRun("lease_lost", reviewed, failed, len(candidates))
            version = await self.repo.version(row.version_id)
            if version is None:
                continue  # deleted since the query
            call = self._reviewer.call(version, None, night_call_id(version.version_id, day))
            chars = platform_prompt_chars(version.config, version.explanation)
            try:
                budget = await self.budget(call, chars)
            except ContractError as e:
                # No answer from the gateway: no figures, no call (never spend blind).
                log.warning("the night cannot ask the gateway for its budget: %s", e.message)
                return NightRun("gateway_unavailable", reviewed, failed, len(candidates))
            if budget.next_usd is None:
                return NightRun("no_estimate", reviewed, failed, len(candidates))
            if not share_allows(budget.spent_usd, budget.next_usd, budget.share_usd):
                return NightRun("share_spent", reviewed, failed, len(candidates))
            try:
                review = await self._reviewer.review(
                    version,
                    user=None,
                    request_id=call.request_id,
                    trigger="night",
                    keep_failed=True,
                    call=call,
                )
            except LlmNotAnswered:
                # The gateway is not answering: no row stored, the version stays a candidate.
                return NightRun("gateway_unavailable", reviewed, failed, len(candidates))
            except ContractError as e:
                # Raised only by what ends the night (night_stops_on), or rate_limited, which a
                # call by no person should never meet: either way, no more calls this run.
                return NightRun(e.code.value, reviewed, failed, len(candidates))
            if review.state is ReviewState.failed:
                failed += 1
            else:
                reviewed += 1
        return NightRun("done", reviewed, failed, len(candidates))

    async def budget(self, call: CompleteRequest, prompt_chars: int | None = None) -> NightBudget:
        """The share check's figures, asked of the gateway in ONE `llm.v1.usage` request.

        spent = today's review calls by no person (`by_purpose.review.no_person.cost_usd`) plus
        their in-flight holds (`held_by_purpose.review.no_person`); next = the worst case of
        `call` as the platform computes it from `prompt_chars` (`share_estimate_usd`: the
        gateway's prices, the platform's formula, FACTS E), else the gateway's own hold
        (`estimate_usd`: a gateway that does not know the platform's formula); None when it
        gave neither, and the night then stops rather than guess.
        """
        usage = await self.usage(call, prompt_chars)
        spend = usage.by_purpose.get(Purpose.review)
        held = usage.held_by_purpose.get(Purpose.review)
        spent = (spend.no_person.cost_usd if spend else Decimal(0)) + (
            held.no_person if held else Decimal(0)
        )
        budget = NightBudget(
            cap_usd=usage.cap_usd,
            share_usd=night_share_usd(usage.cap_usd, self._settings.night_share),
            spent_usd=spent,
            next_usd=(
                usage.share_estimate_usd
                if usage.share_estimate_usd is not None
                else usage.estimate_usd
            ),
        )
        self.last_budget = budget
        return budget

    async def usage(
        self, call: CompleteRequest | None = None, prompt_chars: int | None = None
    ) -> UsageReply:
        """`llm.v1.usage` for today, with `call`'s worst case when given (and the platform's,
        with `prompt_chars`)."""
        return await self._llm.usage(estimate=call, prompt_chars=prompt_chars)
