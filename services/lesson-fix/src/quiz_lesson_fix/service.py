"""The lesson checks and "Fix with AI" (seed 003), in the seed's order.

A fix request, step by step (`fix`); each step runs only when the one before let it through:

1. shape (the contract, at the edge) and size: the lesson reduced (image blocks to `{id, type}`)
   and measured as JSON; over MAX_FIX_DOC_CHARS → 413 `lesson_too_large`;
2. human verification (HTTP only: a service asking over NATS vouches for its person) → 403
   `verification_failed` / 502 `verification_unavailable`;
3. the person's rate limit, one token per fix however many tries it takes → 429 `rate_limited`;
4. the full lesson checks, ONCE: the finding found again by key (409 `finding_gone`, 400
   `no_ai_fix`), and that same pass is the "before" of every checkFix;
5. up to two model tries through the gateway (purpose `lesson_fix`, the person as user), each
   judged by checkFix → the operations, or 422 `fix_failed`; gateway errors pass through as
   LlmClient maps them (409 `llm_not_configured`, 429, 502 `llm_failed`).

Full checks (step 4 and each checkFix) run in a small pool of worker threads, so a large
lesson never holds the event loop. Nothing is cached: asking again gives a different fix.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.lesson import CheckReply, FixReply
from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.domain.checks import CheckResult, validate_lesson
from quiz_lesson_fix.domain.fix import ensure_fix_size, find_finding, reduce_lesson, suggest_fix
from quiz_lesson_fix.metrics import LessonFixMetrics
from quiz_lesson_fix.model_call import gateway_complete
from quiz_lesson_fix.repository import RateLimitRepository
from quiz_lesson_fix.verification import HumanVerifier
from quiz_servicekit.llm import LlmClient

log = logging.getLogger(__name__)
T = TypeVar("T")


class LessonFixService:
    """Checks lessons and fixes one finding at a time; built once in the lifespan."""

    def __init__(
        self,
        *,
        llm: LlmClient,
        verifier: HumanVerifier | None,
        limits: RateLimitRepository,
        settings: Settings,
        metrics: LessonFixMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._llm = llm
        # None: verification is switched off (development only; main.py says so loudly).
        self._verifier = verifier
        self._limits = limits
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._pool = ThreadPoolExecutor(settings.check_threads, thread_name_prefix="lesson-checks")

    async def aclose(self) -> None:
        """Release the verifier's connections and the check threads."""
        if self._verifier is not None:
            await self._verifier.aclose()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- the checks ------------------------------------------------------------------------

    async def check(self, lesson: dict[str, Any]) -> CheckReply:
        """Every finding of the lesson; 413 `lesson_too_large` over MAX_FIX_DOC_CHARS."""
        result = await self._checked(self._reduced(lesson, "check"))
        return CheckReply(errors=result.errors, warnings=result.warnings)

    # ---- the fix ---------------------------------------------------------------------------

    async def fix(
        self,
        person: str,
        lesson: dict[str, Any],
        key: str,
        *,
        token: str | None,
        caller: str | None = None,
    ) -> FixReply:
        """A fix of the finding `key` for `person`; `token` None skips human verification.

        `caller`: the caller key of the request (`quiz_servicekit.request_ids.caller_key`), which
        names its model calls (`model_call.gateway_complete`): sent again, it is not paid again.

        Errors, each raised before the next step runs: lesson_too_large (413),
        verification_failed (403) / verification_unavailable (502), rate_limited (429),
        finding_gone (409), no_ai_fix (400), then the gateway's codes and fix_failed (422).
        """
        try:
            reply, attempts = await self._fix(person, lesson, key, token, caller)
        except ContractError as e:
            self._metrics.fixes.labels(e.code.value).inc()
            log.info("fix refused: %s", e.code.value)
            raise
        self._metrics.fixes.labels("ok").inc()
        self._metrics.passed.labels(str(attempts)).inc()
        log.info("fix passed at try %d (%d new warnings)", attempts, reply.newWarnings)
        return reply

    async def _fix(
        self, person: str, lesson: dict[str, Any], key: str, token: str | None, caller: str | None
    ) -> tuple[FixReply, int]:
        doc = self._reduced(lesson, "fix with AI")
        await self._verify(token)
        await self._take_token(person)
        before = await self._checked(doc)
        finding = find_finding(before, key)
        outcome = await suggest_fix(
            doc,
            finding,
            complete=gateway_complete(
                self._llm,
                person,
                deadline_s=self._settings.llm_deadline_s,
                max_output_tokens=self._settings.max_output_tokens,
                caller=caller,
            ),
            before=before,
            offload=self._in_thread,
        )
        for attempt in outcome.attempts:
            if not attempt.passed:
                # The problems quote the lesson: counted here, never logged.
                log.info(
                    "fix try %d of %s failed with %d problem(s)",
                    attempt.number,
                    finding.code,
                    len(attempt.problems),
                )
        return outcome.reply(), len(outcome.attempts)

    async def prune_rate_limits(self) -> int:
        """Forget the rate-limit rows of people whose bucket is full again."""
        return await self._limits.prune(self._clock())

    # ---- steps -----------------------------------------------------------------------------

    @staticmethod
    def _reduced(lesson: dict[str, Any], action: str) -> dict[str, Any]:
        doc = reduce_lesson(lesson)
        if doc is None:
            raise ContractError(ErrorCode.invalid_request, "doc: a lesson needs its sections list")
        ensure_fix_size(doc, action)
        return doc

    async def _verify(self, token: str | None) -> None:
        if token is None:
            return
        if self._verifier is None:
            self._metrics.verifications.labels("disabled").inc()
            return
        try:
            await self._verifier.verify(token)
        except ContractError as e:
            self._metrics.verifications.labels(e.code.value).inc()
            raise
        self._metrics.verifications.labels("ok").inc()

    async def _take_token(self, person: str) -> None:
        limit, window = self._settings.rate_limit, self._settings.rate_window_s
        if limit <= 0:
            return
        decision = await self._limits.take(person, self._clock(), limit, window)
        if not decision.allowed:
            wait = math.ceil(decision.retry_after_s)
            raise ContractError(
                ErrorCode.rate_limited,
                f"Too many fixes: at most {limit} every {window:g} s. Try again in {wait} s.",
                retry_after_s=decision.retry_after_s,
            )

    async def _checked(self, doc: dict[str, Any]) -> CheckResult:
        return await self._in_thread(lambda: validate_lesson(doc))

    async def _in_thread(self, step: Callable[[], T]) -> T:
        """Run a CPU-bound step on a check thread, timing the step itself (not the queue)."""

        def timed() -> T:
            started = time.perf_counter()
            try:
                return step()
            finally:
                self._metrics.check_seconds.observe(time.perf_counter() - started)

        return await asyncio.get_running_loop().run_in_executor(self._pool, timed)
