"""The review's use cases (ADR-060), each a short script over the repository and the gateway.

- question-store events → the read model (idempotent: `repository`);
- a review request (`review.v1.requests`) → at most one review per version → `review.v1.completed`;
- Review now, Ignore, Fix/Undo, the pool's tab, its switch, the pills (the HTTP routes);
- the item-writing-flaw lint (`review.v1.lint` and its HTTP route): `domain.iwf`, no model;
- the night (`run_night`, hourly): `night.ReviewNight`, within its share of the cap.

Each review, whatever its trigger, is `reviewer.Reviewer`'s: the call, the reply read, the row.

Time is injected (`clock`, an aware datetime, handed to both) so the window and "before today's
Zurich midnight" are tested at chosen instants.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from quiz_contracts.errors import ContractError, ErrorBody, ErrorCode
from quiz_contracts.llm import CompleteRequest, UsageReply
from quiz_contracts.review import (
    LintReply,
    LintRequest,
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
from quiz_review.domain.call_ids import now_call_id, request_call_id
from quiz_review.domain.fixes import fix_review
from quiz_review.domain.iwf.lint import lint_question
from quiz_review.domain.states import (
    pill_for,
    request_needs_review,
    require_published,
    require_review,
    require_reviewable,
    review_list,
)
from quiz_review.metrics import ReviewMetrics
from quiz_review.night import NightBudget, NightRun, ReviewNight
from quiz_review.repository import ReviewRepository, VersionRecord
from quiz_review.reviewer import Clock, Reviewer, utc_now
from quiz_servicekit.lease import KvLease
from quiz_servicekit.llm import LlmClient, LlmNotAnswered

log = logging.getLogger(__name__)
Publish = Callable[[ReviewCompleted, str], Awaitable[None]]


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
        self._metrics = metrics
        self._clock = clock
        self._reviewer = Reviewer(
            repo=repo, llm=llm, settings=settings, metrics=metrics, clock=clock
        )
        self.night = ReviewNight(
            repo=repo,
            llm=llm,
            reviewer=self._reviewer,
            settings=settings,
            metrics=metrics,
            lease=lease,
            clock=clock,
        )

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
                review = await self._reviewer.review(
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
        return await self._reviewer.review(
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
        tab = review_list(enabled, await self.repo.tab_rows(pool_id))
        tab.lint = await self.repo.pool_lint(pool_id)
        return tab

    async def set_pool(
        self, pool_id: str, enabled: bool, who: str, lint: bool | None = None
    ) -> ReviewList:
        """The night's switch, and the lint's notices in reviews when `lint` is given."""
        await self.repo.set_pool(pool_id, enabled, who, self._clock())
        log.info("review of pool %s turned %s", pool_id, "on" if enabled else "off")
        if lint is not None:
            await self.repo.set_pool_lint(pool_id, lint, who, self._clock())
            log.info("lint notices of pool %s turned %s", pool_id, "on" if lint else "off")
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

    # ---- the item-writing-flaw lint (issue 30) ------------------------------------------------

    def lint(self, request: LintRequest) -> LintReply:
        """The lint of one config (`domain.iwf.lint.lint_question`): pure and sub-millisecond,
        so it runs on the loop. Errors: lint_unsupported (400), limit_exceeded and
        draft_invalid (422, `details.problems`)."""
        try:
            reply = lint_question(request.type, request.language, request.config)
        except ContractError as e:
            self._metrics.lints.labels(e.code.value).inc()
            raise
        self._metrics.lints.labels("findings" if reply.findings else "clean").inc()
        return reply

    # ---- the night (night.py) ---------------------------------------------------------------

    async def run_night(self) -> NightRun:
        """One hourly run of the task `llm.review` (`ReviewNight.run`)."""
        return await self.night.run()

    @property
    def last_budget(self) -> NightBudget | None:
        """The night's last share check (for logs and the bench)."""
        return self.night.last_budget

    async def usage(
        self, call: CompleteRequest | None = None, prompt_chars: int | None = None
    ) -> UsageReply:
        """`llm.v1.usage` for today, with `call`'s worst case when given (and the platform's,
        with `prompt_chars`)."""
        return await self.night.usage(call, prompt_chars)
