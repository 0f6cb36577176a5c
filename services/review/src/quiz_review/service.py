"""The review's use cases (ADR-060), each a short script over the repository and the gateway.

- question-store events → the read model (idempotent: `repository`);
- a review request (`review.v1.requests`) → at most one review per version → `review.v1.completed`;
- Review now, Ignore, Fix/Undo, the pool's tab, its switch, the pills (the HTTP routes);
- the night (`run_night`, hourly): inside the Zurich window, under the lease, newest candidate
  first, one call at a time, and before EACH call the gateway is asked (`llm.v1.usage` with the
  next call as `estimate`) for today's no-person review spend, its in-flight holds and the worst
  case of that call, so the night stops before its share of the cap is crossed.

Time is injected (`clock`, an aware datetime) so the window and "before today's Zurich midnight"
are tested at chosen instants.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from quiz_contracts.errors import ContractError, ErrorBody, ErrorCode
from quiz_contracts.llm import CompleteRequest, Purpose, UsageReply
from quiz_contracts.review import (
    QuestionDeleted,
    QuestionRetired,
    QuestionReview,
    QuestionVersionDeleted,
    QuestionVersionPublished,
    ReviewCompleted,
    ReviewFixRequest,
    ReviewFixResult,
    ReviewList,
    ReviewPill,
    ReviewRequest,
    ReviewState,
)
from quiz_review.config import Settings
from quiz_review.domain.call_ids import night_call_id, now_call_id, request_call_id
from quiz_review.domain.findings import kept_findings, read_reply, review_state_for
from quiz_review.domain.fixes import fix_review
from quiz_review.domain.night import (
    ZURICH,
    is_review_night,
    night_candidates,
    night_share_usd,
    night_stops_on,
    share_allows,
)
from quiz_review.domain.prompt import review_request
from quiz_review.domain.states import (
    pill_for,
    request_needs_review,
    require_published,
    require_review,
    require_reviewable,
    review_list,
)
from quiz_review.metrics import ReviewMetrics
from quiz_review.repository import ReviewRepository, VersionRecord
from quiz_servicekit.lease import KvLease
from quiz_servicekit.llm import LlmClient, LlmNotAnswered

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
Publish = Callable[[ReviewCompleted, str], Awaitable[None]]


def utc_now() -> datetime:
    return datetime.now(UTC)


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


class ReviewService:
    """Built once in the lifespan; every route, consumer and the periodic task call it."""

    def __init__(
        self,
        *,
        repo: ReviewRepository,
        llm: LlmClient,
        publish: Publish,
        settings: Settings,
        metrics: ReviewMetrics,
        lease: KvLease | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.repo = repo
        self._llm = llm
        self._publish = publish
        self._settings = settings
        self._metrics = metrics
        self._lease = lease
        self._clock = clock
        # The last share check of the night (for logs and the bench).
        self.last_budget: NightBudget | None = None

    @property
    def llm(self) -> LlmClient:
        """The gateway client (also for `llm.v1.usage` figures)."""
        return self._llm

    # ---- the question store's events --------------------------------------------------------

    async def on_published(self, event: QuestionVersionPublished) -> None:
        inserted = await self.repo.record_published(event)
        self._metrics.events.labels("published" if inserted else "duplicate").inc()

    async def on_version_deleted(self, event: QuestionVersionDeleted) -> None:
        await self.repo.delete_version(event.version_id, event.deleted_at)
        self._metrics.events.labels("version_deleted").inc()

    async def on_retired(self, event: QuestionRetired) -> None:
        await self.repo.retire_question(event.question_id, event.retired_at)
        self._metrics.events.labels("retired").inc()

    async def on_deleted(self, event: QuestionDeleted) -> None:
        await self.repo.delete_question(event.question_id, event.deleted_at)
        self._metrics.events.labels("deleted").inc()

    # ---- review requests --------------------------------------------------------------------

    async def handle_request(
        self, req: ReviewRequest, completed_id: str, *, may_wait: bool = False
    ) -> ReviewCompleted:
        """Answer one request (at most one review per version) and publish its outcome.

        `completed_id` is the `Nats-Msg-Id` of the `review.v1.completed` event: derived from the
        request's delivery, so a redelivered request publishes its outcome once.
        `may_wait` (a later delivery will come): a request naming a version the read model does
        not hold yet raises a retryable ContractError instead of answering `not_published` —
        the version's event and the request travel on different streams, and the request may
        come first; and a call the gateway did not answer (`LlmNotAnswered`: unreachable, reply
        lost, `unavailable`) is raised to be retried with the same request id, instead of
        answering `llm_failed` with nothing stored.
        """
        if may_wait and req.version_id is not None:
            known = await self.repo.version(req.version_id)
            if known is None and not await self.repo.is_gone(f"version:{req.version_id}"):
                raise ContractError(
                    ErrorCode.not_published,
                    f"version {req.version_id} is not in the read model yet; retried",
                )
        completed, outcome = await self._answer(req, may_wait=may_wait)
        self._metrics.requests.labels(outcome).inc()
        await self._publish(completed, completed_id)
        return completed

    async def _answer(self, req: ReviewRequest, *, may_wait: bool) -> tuple[ReviewCompleted, str]:
        def error(
            code: ErrorCode,
            message: str,
            version: VersionRecord | None,
            retry_after_s: float | None = None,
        ) -> tuple[ReviewCompleted, str]:
            return ReviewCompleted(
                question_id=req.question_id,
                pool_id=version.pool_id if version else None,
                version_id=version.version_id if version else req.version_id,
                request_id=req.request_id,
                error=ErrorBody(code=code, message=message, retry_after_s=retry_after_s),
            ), code.value

        if req.version_id is not None:
            version = await self.repo.version(req.version_id)
            if version is not None and version.question_id != req.question_id:
                version = None
        else:
            version = await self.repo.latest_version(req.question_id)
        if version is None or not version.live:
            return error(ErrorCode.not_published, "no such published version", None)
        try:
            require_reviewable(version.type)
        except ContractError as e:
            return error(e.code, e.message, version)
        existing = await self.repo.review_of(version.version_id)
        review, outcome = existing, "existing"
        if request_needs_review(existing):
            outcome = "reviewed"
            try:
                review = await self._review(
                    version,
                    user=req.user,
                    request_id=request_call_id(version.version_id, req.request_id),
                    trigger="request",
                    keep_failed=existing is None or existing.state is ReviewState.failed,
                )
            except LlmNotAnswered as e:
                if may_wait:
                    raise  # nak'ed, redelivered later: the same id then gets the paid answer
                # The last delivery: a retryable error for the requester, nothing stored (the
                # version stays unreviewed for the night or a new request).
                return error(e.code, e.message, version, e.retry_after_s)
            except ContractError as e:
                return error(e.code, e.message, version)
        assert review is not None
        return ReviewCompleted(
            question_id=version.question_id,
            pool_id=version.pool_id,
            version_id=version.version_id,
            request_id=req.request_id,
            review=review,
            pill=pill_for(review),
        ), outcome

    # ---- the routes -------------------------------------------------------------------------

    async def question_pool(self, question_id: str) -> str | None:
        """The pool of the question's latest published version (None: unknown question)."""
        latest = await self.repo.latest_version(question_id)
        return None if latest is None else latest.pool_id

    async def review_now(self, question_id: str, user: str, caller: str) -> QuestionReview:
        """Review the question's latest published version now, for `user` (ADR-060 §1).

        `caller`: the HTTP request's caller key (`quiz_servicekit.request_ids.caller_key`),
        which with the version names the call (`call_ids.now_call_id`): the person's retry of
        a call whose answer was lost gets it from the gateway, free.
        Errors: not_published, review_unsupported (400) before any call; then the gateway's
        llm_not_configured (409), rate_limited / llm_budget_exhausted (429), llm_failed (502).
        """
        latest = await self.repo.latest_version(question_id)
        version = require_published(latest if latest is not None and latest.live else None)
        require_reviewable(version.type)
        return await self._review(
            version,
            user=user,
            request_id=now_call_id(version.version_id, caller),
            trigger="now",
            keep_failed=False,
        )

    async def ignore(self, question_id: str) -> QuestionReview:
        """Set the latest version's whole review to ignored (never reviewed again)."""
        version, review = await self.repo.latest_with_review(question_id)
        version = require_published(version)
        require_reviewable(version.type)
        current = require_review(review)
        ignored = current.model_copy(update={"state": ReviewState.ignored})
        if not await self.repo.update_review(version.version_id, current, ignored):
            raise ContractError(ErrorCode.fix_stale, "the review changed meanwhile; try again")
        return ignored

    async def fix(self, question_id: str, body: ReviewFixRequest) -> ReviewFixResult:
        """Fix or Undo one finding of the latest version's review on the editor's draft.

        Errors: not_published, review_unsupported, no_review, no_fix (400); fix_stale (409).
        The stored finding's `applied` flag changes only when the draft took the replacement.
        """
        version, review = await self.repo.latest_with_review(question_id)
        if version is not None:
            require_reviewable(version.type)
        result = fix_review(body, None if version is None else version.version_number, review)
        assert version is not None and review is not None
        if not await self.repo.update_review(version.version_id, review, result.review):
            raise ContractError(ErrorCode.fix_stale, "the review changed meanwhile; try again")
        return result

    async def tab(self, pool_id: str) -> ReviewList:
        enabled = await self.repo.pool_enabled(pool_id)
        return review_list(enabled, await self.repo.tab_rows(pool_id))

    async def set_pool(self, pool_id: str, enabled: bool, who: str) -> ReviewList:
        await self.repo.set_pool(pool_id, enabled, who, self._clock())
        log.info("review of pool %s turned %s", pool_id, "on" if enabled else "off")
        return await self.tab(pool_id)

    async def pills(
        self, question_ids: Sequence[str], may_see: Callable[[str, str], bool]
    ) -> dict[str, ReviewPill]:
        """Pills of the questions `may_see(question_id, pool_id)` lets through; no row, no pill."""
        rows = await self.repo.pills_rows(question_ids)
        out: dict[str, ReviewPill] = {}
        for question_id, (pool_id, review) in rows.items():
            pill = pill_for(review)
            if pill is not None and may_see(question_id, pool_id):
                out[question_id] = pill
        return out

    # ---- one review -------------------------------------------------------------------------

    def _call(
        self, version: VersionRecord, user: str | None, request_id: str | None
    ) -> CompleteRequest:
        return review_request(
            version.type,
            version.config,
            version.explanation,
            user=user,
            request_id=request_id,
            deadline_s=self._settings.llm_deadline_s,
        )

    async def _review(
        self,
        version: VersionRecord,
        *,
        user: str | None,
        request_id: str | None,
        trigger: str,
        keep_failed: bool,
        call: CompleteRequest | None = None,
    ) -> QuestionReview:
        """One model call on `version`, its row stored (clean/findings, or failed).

        A gateway failure that ends the night or is the person's (llm_not_configured,
        llm_budget_exhausted, rate_limited) is raised with nothing stored; so is a call the
        gateway did not answer (`LlmNotAnswered`: no gateway, the reply lost, the gateway
        `unavailable`) — not an outcome: the call may have been made and paid, and asked again
        under the same request id it is answered from the gateway's stored reply. Any other
        failure (the model's or the gateway's own refusal: llm_failed) stores `failed` when
        `keep_failed` and raises llm_failed otherwise.
        """
        call = call or self._call(version, user, request_id)
        try:
            reply = await self._llm.complete(call)
            findings = kept_findings(version.config, version.explanation, read_reply(reply.output))
            review = QuestionReview(
                version_number=version.version_number,
                state=review_state_for(findings),
                findings=findings,
                reviewed_at=self._clock(),
            )
        except LlmNotAnswered:
            self._metrics.reviews.labels(trigger, "not_answered").inc()
            log.warning("review of version %s not answered by the gateway", version.version_id)
            raise
        except ContractError as e:
            stops = night_stops_on(e.code) or e.code is ErrorCode.rate_limited
            self._metrics.reviews.labels(trigger, e.code.value).inc()
            log.info("review of version %s failed: %s", version.version_id, e.code.value)
            if stops or not keep_failed:
                raise
            review = QuestionReview(
                version_number=version.version_number,
                state=ReviewState.failed,
                findings=[],
                reviewed_at=self._clock(),
            )
            await self.repo.store_review(version, review, user)
            self._metrics.reviews.labels(trigger, "failed").inc()
            return review
        await self.repo.store_review(version, review, user)
        self._metrics.reviews.labels(trigger, review.state.value).inc()
        log.info(
            "reviewed version %s (%s): %s, %d finding(s)",
            version.version_id,
            trigger,
            review.state.value,
            len(review.findings),
        )
        return review

    # ---- the night --------------------------------------------------------------------------

    async def run_night(self) -> NightRun:
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
            call = self._call(version, None, night_call_id(version.version_id, day))
            try:
                budget = await self.night_budget(call)
            except ContractError as e:
                # No answer from the gateway: no figures, no call (never spend blind).
                log.warning("the night cannot ask the gateway for its budget: %s", e.message)
                return NightRun("gateway_unavailable", reviewed, failed, len(candidates))
            if budget.next_usd is None:
                return NightRun("no_estimate", reviewed, failed, len(candidates))
            if not share_allows(budget.spent_usd, budget.next_usd, budget.share_usd):
                return NightRun("share_spent", reviewed, failed, len(candidates))
            try:
                review = await self._review(
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

    async def night_budget(self, call: CompleteRequest) -> NightBudget:
        """The share check's figures, asked of the gateway in ONE `llm.v1.usage` request.

        spent = today's review calls by no person (`by_purpose.review.no_person.cost_usd`) plus
        their in-flight holds (`held_by_purpose.review.no_person`); next = the gateway's own
        worst case of `call` (`estimate_usd`: its formula, its prices; None when it gave none,
        and the night then stops rather than guess).
        """
        usage = await self.usage(call)
        spend = usage.by_purpose.get(Purpose.review)
        held = usage.held_by_purpose.get(Purpose.review)
        spent = (spend.no_person.cost_usd if spend else Decimal(0)) + (
            held.no_person if held else Decimal(0)
        )
        budget = NightBudget(
            cap_usd=usage.cap_usd,
            share_usd=night_share_usd(usage.cap_usd, self._settings.night_share),
            spent_usd=spent,
            next_usd=usage.estimate_usd,
        )
        self.last_budget = budget
        return budget

    async def usage(self, call: CompleteRequest | None = None) -> UsageReply:
        """`llm.v1.usage` for today, with `call`'s worst case when given."""
        return await self._llm.usage(estimate=call)
