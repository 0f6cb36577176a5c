"""One review (ADR-060): the model call on a published version and its row stored.

Used by every trigger alike: a request (`review.v1.requests`), Review now, and the night. The
call is named by its trigger's request id (`domain/call_ids`), so a retry is answered from the
gateway's stored reply instead of paid again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteRequest
from quiz_contracts.review import QuestionReview, ReviewState
from quiz_review.config import Settings
from quiz_review.domain.findings import kept_findings, read_reply, review_state_for
from quiz_review.domain.iwf.in_reviews import with_lint_notices
from quiz_review.domain.night import night_stops_on
from quiz_review.domain.prompt import review_request
from quiz_review.metrics import ReviewMetrics
from quiz_review.repository import ReviewRepository, VersionRecord
from quiz_servicekit.llm import LlmClient, LlmNotAnswered

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Reviewer:
    """Makes one review: builds the call, asks the gateway, reads the reply, stores the row."""

    def __init__(
        self,
        *,
        repo: ReviewRepository,
        llm: LlmClient,
        settings: Settings,
        metrics: ReviewMetrics,
        clock: Clock,
    ) -> None:
        self.repo = repo
        self._llm = llm
        self._settings = settings
        self._metrics = metrics
        self._clock = clock

    def call(
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

    async def review(
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
        call = call or self.call(version, user, request_id)
        try:
            reply = await self._llm.complete(call)
            findings = kept_findings(version.config, version.explanation, read_reply(reply.output))
            if await self.repo.pool_lint(version.pool_id):
                # Issue 30: the lint's notices beside the model's, never sent to it.
                findings = with_lint_notices(
                    findings, version.type, version.config, version.language
                )
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
