"""The error model on the wire: `{code, message}` with one enum of every code the seeds name."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class ErrorCode(StrEnum):
    """Every error code a service may answer, on HTTP and on NATS alike."""

    # Generic edge errors.
    invalid_request = "invalid_request"
    unauthorized = "unauthorized"
    not_found = "not_found"
    internal = "internal"
    timeout = "timeout"
    unavailable = "unavailable"
    # ADR-059 (Generate).
    statement_empty = "statement_empty"
    item_not_empty = "item_not_empty"
    draft_invalid = "draft_invalid"
    runner_unavailable = "runner_unavailable"
    runner_busy = "runner_busy"
    compile_failed = "compile_failed"
    partial = "partial"
    # heig-quiz apps/api/src/modules/pool/generate.ts: a type (or an item) without a wand.
    generate_unsupported = "generate_unsupported"
    # llm-gateway (ADR-058 as cited by ADR-059/060/071).
    llm_not_configured = "llm_not_configured"
    llm_budget_exhausted = "llm_budget_exhausted"
    rate_limited = "rate_limited"
    llm_failed = "llm_failed"
    # ADR-071 (poll): turning AI on while no model can be called.
    llm_unavailable = "llm_unavailable"
    question_keyless = "question_keyless"
    # ADR-060 (review).
    fix_stale = "fix_stale"
    # HQ apps/api/src/modules/pool/review.ts (ReviewRefusal): refused before any model call.
    review_unsupported = "review_unsupported"
    no_fix = "no_fix"
    no_review = "no_review"
    not_published = "not_published"
    # Issue 30 (review.v1.lint): the item-writing-flaw lint reads mcq only.
    lint_unsupported = "lint_unsupported"
    # runner: a request over a hard maximum.
    limit_exceeded = "limit_exceeded"
    unsupported_language = "unsupported_language"
    # ADR-071 (poll): a type that is not a brainstorm, a reveal of a keyless question, an answer
    # over the question's maxIdeas, and moderation 30 days after close (amendment 2026-10-15).
    poll_type = "poll_type"
    poll_keyless = "poll_keyless"
    answer_invalid = "answer_invalid"
    poll_frozen = "poll_frozen"
    # AI lesson fixes (seed 003; the tool's FixError statuses, apps/api/src/lib/lessonFix.js).
    finding_gone = "finding_gone"
    no_ai_fix = "no_ai_fix"
    fix_failed = "fix_failed"
    lesson_too_large = "lesson_too_large"
    # AI lesson fixes: the human verification before any costly work (a Turnstile-compatible
    # siteverify; the tool's apps/api/src/lib/turnstile.js answers 403 and 502).
    verification_failed = "verification_failed"
    verification_unavailable = "verification_unavailable"
    # Edge: a request body or message over the maximum of its route or of the NATS hop.
    payload_too_large = "payload_too_large"
    # Issue 29: a caller asking for what the bus identity it came with does not allow (another
    # service's purpose, a payer it may not name), refused before anything is spent.
    forbidden = "forbidden"
    # Issue 29: an idempotency key (Idempotency-Key, a request id) sent again with another body.
    idempotency_key_reused = "idempotency_key_reused"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.invalid_request: 400,
    ErrorCode.unauthorized: 401,
    ErrorCode.forbidden: 403,
    ErrorCode.idempotency_key_reused: 422,
    ErrorCode.not_found: 404,
    ErrorCode.internal: 500,
    ErrorCode.timeout: 504,
    ErrorCode.unavailable: 503,
    ErrorCode.statement_empty: 422,
    ErrorCode.item_not_empty: 422,
    ErrorCode.draft_invalid: 422,
    ErrorCode.runner_unavailable: 503,
    ErrorCode.runner_busy: 503,
    ErrorCode.compile_failed: 422,
    ErrorCode.partial: 422,
    ErrorCode.generate_unsupported: 422,
    ErrorCode.llm_not_configured: 409,
    ErrorCode.llm_budget_exhausted: 429,
    ErrorCode.rate_limited: 429,
    ErrorCode.llm_failed: 502,
    ErrorCode.llm_unavailable: 422,
    ErrorCode.question_keyless: 422,
    ErrorCode.fix_stale: 409,
    # HQ routeContext.ts answers every ReviewRefusal but fix_stale with a 400.
    ErrorCode.review_unsupported: 400,
    ErrorCode.lint_unsupported: 400,
    ErrorCode.no_fix: 400,
    ErrorCode.no_review: 400,
    ErrorCode.not_published: 400,
    ErrorCode.limit_exceeded: 422,
    ErrorCode.unsupported_language: 422,
    ErrorCode.poll_type: 422,
    ErrorCode.poll_keyless: 422,
    ErrorCode.answer_invalid: 422,
    ErrorCode.poll_frozen: 409,
    ErrorCode.finding_gone: 409,
    ErrorCode.no_ai_fix: 400,
    ErrorCode.fix_failed: 422,
    ErrorCode.lesson_too_large: 413,
    ErrorCode.verification_failed: 403,
    ErrorCode.verification_unavailable: 502,
    ErrorCode.payload_too_large: 413,
}


# The way out every "no model" refusal gives a person (issue 34 item 3): `llm_not_configured`
# from the gateway, a harness's availability check, the poll's AI switch (`llm_unavailable`).
NO_MODEL_HINT = (
    "to call a model, set ANTHROPIC_API_KEY (a provider key) for the llm-gateway and restart "
    "it; to try every feature without a key, run `make run DEMO=1` (canned replies)"
)
NOT_CONFIGURED_MESSAGE = f"no LLM provider key is configured: {NO_MODEL_HINT}"


def http_status(code: ErrorCode | str) -> int:
    """HTTP status of an error code; unknown codes are server errors."""
    try:
        return HTTP_STATUS[ErrorCode(code)]
    except ValueError:
        return 500


class ErrorBody(BaseModel):
    """Every error on the wire."""

    code: ErrorCode
    message: str
    retry_after_s: float | None = Field(
        default=None, description="When to try again, for rate_limited and runner_busy."
    )
    details: dict[str, Any] | None = None


class ContractError(Exception):
    """An error that crosses a service edge as an ErrorBody."""

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retry_after_s: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = ErrorCode(code)
        self.message = message
        self.retry_after_s = retry_after_s
        self.details = details

    @property
    def status(self) -> int:
        return http_status(self.code)

    def to_body(self) -> ErrorBody:
        return ErrorBody(
            code=self.code,
            message=self.message,
            retry_after_s=self.retry_after_s,
            details=self.details,
        )

    @classmethod
    def from_body(cls, body: ErrorBody) -> ContractError:
        return cls(body.code, body.message, retry_after_s=body.retry_after_s, details=body.details)
