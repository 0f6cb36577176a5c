"""ADR-060 "LLM review": findings, reviews, the pill, the pool's tab and switch, Fix/Undo, and
the JetStream events and requests of the review service.

Every model here speaks the platform's camelCase on the wire (HQ
`packages/contracts/src/review.ts`: `versionNumber`, `reviewedAt`, `questionId`…): its HTTP
bodies are the front end's, and its events come from the platform's question store. Python code
uses the snake_case attribute names; JSON (`model_dump(mode="json")`, `model_dump_json()`,
FastAPI, `model_json_schema()`) uses the camelCase ones, and input is accepted under either.

HTTP (under `/app/api`, the platform's routes in `apps/api/src/modules/pool/reviewRoutes.ts`):
- `GET  /pools/{id}/reviews`            → ReviewList
- `PUT  /pools/{id}/review`  ReviewToggle → ReviewList (owner)
- `POST /reviews/pills`  ReviewPillsRequest → ReviewPillsReply
- `POST /questions/{id}/review`          → QuestionReview ("Review now", contributor)
- `POST /questions/{id}/review/ignore`   → QuestionReview (contributor)
- `POST /questions/{id}/review/fix`  ReviewFixRequest → ReviewFixResult (contributor)

JetStream (subjects in `quiz_contracts.subjects`):
- consumed from the question store: QuestionVersionPublished, QuestionVersionDeleted,
  QuestionRetired, QuestionDeleted;
- consumed from any publisher: ReviewRequest on `review.v1.requests` (set `Nats-Msg-Id`);
- published: ReviewCompleted on `review.v1.completed`, one per handled request.

Request/reply (issue 30): `review.v1.lint` LintRequest → LintReply, the item-writing-flaw lint
of an mcq (no model); the same body on `POST /app/api/pools/{id}/review/lint`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ErrorBody

# HQ packages/domain/src/review.ts: REVIEW_MAX_FINDINGS; the message cut of keptFindings.
REVIEW_MAX_FINDINGS = 20
FINDING_MESSAGE_MAX = 1000
# A dot path into a config is a handful of short keys; a longer one addresses nothing real.
FINDING_PATH_MAX = 1000
# The editor's explanation, as the wand bounds it (FACTS F: cut to 20,000 characters).
EXPLANATION_MAX = 20_000
# Pills are asked for one page of the question list at a time.
PILLS_MAX_QUESTIONS = 500

Id = Annotated[str, Field(min_length=1, max_length=100, description="The platform's id (uuid).")]


class Severity(StrEnum):
    """How bad a finding is (ADR-060 §2), mildest first as in the platform's REVIEW_SEVERITIES."""

    notice = "notice"  # spelling, grammar
    warn = "warn"  # ambiguous; the explanation contradicts the key; a right distractor
    error = "error"  # the key is wrong; the question cannot be answered


class ReviewState(StrEnum):
    """The state of one version's review row (ADR-060 §3)."""

    clean = "clean"  # no finding
    findings = "findings"
    ignored = "ignored"  # a contributor ignored the whole review; never reviewed again
    failed = "failed"  # the call failed; retried the next night


class ReviewModel(WireModel):
    """camelCase on the wire, snake_case in Python; either name is accepted on input."""

    model_config = ConfigDict(
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class FindingFix(ReviewModel):
    """One exact replacement in one field: `from` occurs once in it and becomes `to`.

    For a tick (a boolean field) `from` and `to` are "true"/"false" (ADR-060 §4).
    """

    from_: str = Field(alias="from", description="The exact text to replace (case-sensitive).")
    to: str = Field(description="Its replacement; for a tick, 'true' or 'false'.")


class ReviewFinding(ReviewModel):
    """One remark of a review: the field it is about, what is wrong, an optional exact fix."""

    severity: Severity
    path: str = Field(
        max_length=FINDING_PATH_MAX,
        description="`explanation`, or a dot path into the config (`choices.2.text`); "
        "digit segments are list indices from 0.",
    )
    message: str = Field(
        max_length=FINDING_MESSAGE_MAX, description="In the language of the statement."
    )
    fix: FindingFix | None = None
    applied: bool = Field(
        default=False, description="The fix is in the draft (Fix pressed, not undone)."
    )
    code: str | None = Field(
        default=None,
        max_length=60,
        # Absent rather than null: a model's finding reads exactly as the platform's.
        exclude_if=lambda value: value is None,
        description="A finding of the item-writing-flaw lint (issue 30) carries its code "
        "(`iwf.…`); the model's findings have none (the key is absent).",
    )


class QuestionReview(ReviewModel):
    """The review of one published version."""

    version_number: int = Field(ge=1)
    state: ReviewState
    findings: list[ReviewFinding] = Field(default_factory=list, max_length=REVIEW_MAX_FINDINGS)
    reviewed_at: AwareDatetime


class ReviewPill(ReviewModel):
    """The question list's pill: the latest version's review without its findings.

    `count` and `worst` come from open findings only, i.e. only in state `findings`.
    """

    state: ReviewState
    count: int = Field(ge=0)
    worst: Severity | None = None


class ReviewListItem(ReviewModel):
    """A latest version with open findings, as the pool's tab lists it."""

    question_id: Id
    internal_name: str
    type: str
    review: QuestionReview


class ReviewList(ReviewModel):
    """`GET /app/api/pools/{id}/reviews`: the pool's open findings and how far the review got."""

    enabled: bool = Field(description="The pool's owner turned the night's review on.")
    lint: bool = Field(
        default=False,
        # Absent while off: the platform's tab reads as it always has.
        exclude_if=lambda value: not value,
        description="The pool's reviews carry the item-writing-flaw lint's notices (issue 30); "
        "absent: off.",
    )
    reviewed: int = Field(ge=0, description="Reviewable latest versions with a non-failed row.")
    pending: int = Field(ge=0, description="Reviewable latest versions still waiting.")
    items: list[ReviewListItem] = Field(default_factory=list)


class ReviewToggle(ReviewModel):
    """`PUT /app/api/pools/{id}/review`: the owner turns the night's review on or off, and the
    lint's findings in the pool's reviews (`lint`, issue 30; absent: left as it is)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool
    lint: bool | None = Field(
        default=None,
        description="Add the item-writing-flaw lint's findings to the pool's reviews as "
        "notices (off by default); absent leaves the setting as it is.",
    )


class ReviewPillsRequest(ReviewModel):
    """`POST /app/api/reviews/pills`: the pills of a page of questions."""

    question_ids: list[Id] = Field(min_length=1, max_length=PILLS_MAX_QUESTIONS)


class ReviewPillsReply(ReviewModel):
    """Per question id, its pill; a question without a review row is absent (no pill)."""

    pills: dict[str, ReviewPill] = Field(default_factory=dict)


class ReviewFixRequest(ReviewModel):
    """`POST /app/api/questions/{id}/review/fix`: a finding of the latest review, on the draft.

    The editor sends its DRAFT (we do not own drafts) and receives the new draft, like the
    wand. `undo` applies the inverse replacement of a fix that was applied.
    """

    finding: int = Field(ge=0, le=REVIEW_MAX_FINDINGS - 1, description="Index in the review.")
    undo: bool = False
    config: dict[str, Any] = Field(description="The draft config as it stands.")
    explanation: str = Field(default="", max_length=EXPLANATION_MAX)
    version_number: int | None = Field(
        default=None,
        ge=1,
        description="The version whose review the editor shows; another latest version "
        "answers fix_stale instead of applying a finding of a review it did not see.",
    )


class ReviewFixResult(ReviewModel):
    """The new draft (to be stored as the teacher's edit) and the review with `applied` set."""

    config: dict[str, Any]
    explanation: str
    review: QuestionReview
    draft_hash: str = Field(description="draft_hash() of the config and explanation RECEIVED.")


# --- JetStream: the question store's events --------------------------------------------------


class QuestionVersionPublished(ReviewModel):
    """`questions.v1.version.published`: a version was published (versions are immutable)."""

    question_id: Id
    pool_id: Id
    version_id: Id
    version_number: int = Field(ge=1)
    type: str = Field(min_length=1, max_length=40, description="The question type: mcq, short…")
    config: dict[str, Any]
    explanation: str = ""
    published_at: AwareDatetime
    live: bool = Field(description="The question is live (neither retired nor deleted).")
    internal_name: str = Field(
        default="",
        max_length=500,
        description="The question's name in the pool's tab; never sent to a model.",
    )
    language: str | None = Field(
        default=None,
        min_length=2,
        max_length=35,
        pattern=r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$",
        description="The question's language (issue 30: the lint's word lists); absent: the "
        "lint runs its language-free criteria only.",
    )


class QuestionVersionDeleted(ReviewModel):
    """`questions.v1.version.deleted`: a version is gone; its review row goes with it."""

    question_id: Id
    version_id: Id
    deleted_at: AwareDatetime


class QuestionRetired(ReviewModel):
    """`questions.v1.question.retired`: the question is no longer live."""

    question_id: Id
    retired_at: AwareDatetime


class QuestionDeleted(ReviewModel):
    """`questions.v1.question.deleted`: the question and all its versions are gone."""

    question_id: Id
    deleted_at: AwareDatetime


# --- JetStream: review requests and their outcome --------------------------------------------


class ReviewRequest(ReviewModel):
    """`review.v1.requests`: review a published version.

    Publish with a `Nats-Msg-Id` header (the stream drops a repeat within its duplicate
    window); a version that already has a review row is not reviewed again (dedupe by version),
    except a `failed` one.
    """

    # Typed by `make ts-check` as a TypeScript ReviewRequest (docs/contracts-typescript.md).
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "questionId": "3f1c2a7e-0000-4000-8000-000000000001",
                    "versionId": "9b0d1e4f-0000-4000-8000-00000000000a",
                    "requestId": "edit:9b0d1e4f-0000-4000-8000-00000000000a",
                }
            ]
        }
    )

    question_id: Id
    version_id: Id | None = Field(
        default=None, description="The version to review; null: the latest published one."
    )
    user: str | None = Field(
        default=None,
        max_length=200,
        description="The person the call is attributed to; null: no person (counts against "
        "the night's share of the cap).",
    )
    request_id: str | None = Field(
        default=None, max_length=200, description="Echoed in review.v1.completed."
    )


class ReviewCompleted(ReviewModel):
    """`review.v1.completed`: what became of one request: a review, or why there is none."""

    question_id: Id
    pool_id: Id | None = None
    version_id: Id | None = None
    request_id: str | None = None
    review: QuestionReview | None = Field(
        default=None, description="The version's review (possibly failed, or an earlier one)."
    )
    pill: ReviewPill | None = None
    error: ErrorBody | None = Field(
        default=None, description="not_published, review_unsupported, or the gateway's code."
    )

    @model_validator(mode="after")
    def _review_or_error(self) -> ReviewCompleted:
        if (self.review is None) == (self.error is None):
            raise ValueError("a completed request carries a review or an error, not both")
        return self


# --- review.v1.lint: the item-writing-flaw lint (issue 30) -------------------------------------

# A lint answers every finding of every choice: at most 12 choices × 11 criteria, with room.
LINT_MAX_FINDINGS = 200
LINT_CRITERIA = (3, 4, 6, 9, 10, 11, 12, 14, 16, 17, 19)


class LintRequest(ReviewModel):
    """`review.v1.lint` (and `POST /app/api/pools/{id}/review/lint`): lint a question's config.

    `config` is the platform's mcq config (`quiz_contracts.questions.mcq.McqConfig`), a draft
    or a published one. Errors: `draft_invalid` (422) with its `problems` when the config does
    not validate; `lint_unsupported` (400) for a type other than mcq.
    """

    type: str = Field(min_length=1, max_length=40, description="The question type; mcq only.")
    language: str = Field(
        min_length=2,
        max_length=35,
        pattern=r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$",
        description="The question's language (BCP 47, primary subtag read): fr, en, de, it run "
        "every criterion; another runs the language-free ones (4, 10, 16).",
    )
    config: dict[str, Any] = Field(description="The platform's config of that type.")


class LintFinding(ReviewModel):
    """One item-writing flaw: the rubric's criterion, our code, where, and why (a notice)."""

    code: str = Field(description="`iwf.<flaw>`, e.g. `iwf.none_of_the_above`.")
    criterion: int = Field(
        ge=1, le=19, description="The number of the 19-criterion item-writing-flaw rubric."
    )
    path: str = Field(description="`prompt` or `choices.<i>` (index from 0).")
    severity: Literal[Severity.notice] = Severity.notice
    message: str = Field(max_length=FINDING_MESSAGE_MAX, description="In the question's language.")


class LintReply(ReviewModel):
    """The lint's findings (criterion order, then path) and the criteria it ran."""

    findings: list[LintFinding] = Field(default_factory=list, max_length=LINT_MAX_FINDINGS)
    checked: list[int] = Field(
        description="The criteria run: all eleven for fr/en/de/it, 4, 10, 16 for another language."
    )


__all__ = [
    "EXPLANATION_MAX",
    "FINDING_MESSAGE_MAX",
    "FINDING_PATH_MAX",
    "LINT_CRITERIA",
    "LINT_MAX_FINDINGS",
    "PILLS_MAX_QUESTIONS",
    "REVIEW_MAX_FINDINGS",
    "FindingFix",
    "LintFinding",
    "LintReply",
    "LintRequest",
    "QuestionDeleted",
    "QuestionRetired",
    "QuestionReview",
    "QuestionVersionDeleted",
    "QuestionVersionPublished",
    "ReviewCompleted",
    "ReviewFinding",
    "ReviewFixRequest",
    "ReviewFixResult",
    "ReviewList",
    "ReviewListItem",
    "ReviewPill",
    "ReviewPillsReply",
    "ReviewPillsRequest",
    "ReviewRequest",
    "ReviewState",
    "ReviewToggle",
    "Severity",
]
