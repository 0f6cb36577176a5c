"""llm-gateway wire models (ADR-058 as cited by ADR-059/060/071): complete, availability, usage."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer

from quiz_contracts.base import WireModel
from quiz_contracts.errors import ErrorCode

# Money travels as a decimal string ("0.012345"): never a float on the wire.
Usd = Annotated[Decimal, PlainSerializer(lambda v: str(v), return_type=str, when_used="json")]


class Purpose(StrEnum):
    """Why a call is made; selects the model (PURPOSE_MODELS) and the per-person limit.

    Ours (generate, review, poll, lesson_fix, assistant) and, beside them, the platform's own
    (FACTS E2, `LLM_PURPOSES`: test, grade, generate, review, poll, assist, describe, domain,
    concepts), so the platform's calls keep their purpose here (`PLATFORM_PURPOSES`).
    """

    generate = "generate"  # ADR-059: the wand, the teacher as user
    review = "review"  # ADR-060: the night (user null) or "Review now" (the teacher)
    poll = "poll"  # ADR-071 §12: user null, billed to the teacher running the poll
    lesson_fix = "lesson_fix"
    assistant = "assistant"
    # The platform's (FACTS E2): the settings screen's connection test, the grading pass
    # (ADR-058 §8), the teacher assistant (ADR-080: our `assistant` by its platform name), a
    # pool's proposed description, a public pool's bilingual label (ADR-095), the
    # vocabulary's probable duplicates (ADR-081).
    test = "test"
    grade = "grade"
    assist = "assist"
    describe = "describe"
    domain = "domain"
    concepts = "concepts"


# The platform's purpose names (FACTS E2) → the purpose they are here. Eight are the same word;
# the platform's `assist` is the teacher assistant we call `assistant`: both are accepted, keep
# their own ledger rows, and share one rate limit default and the assistant's share of the cap.
PLATFORM_PURPOSES: dict[str, Purpose] = {
    "test": Purpose.test,
    "grade": Purpose.grade,
    "generate": Purpose.generate,
    "review": Purpose.review,
    "poll": Purpose.poll,
    "assist": Purpose.assist,
    "describe": Purpose.describe,
    "domain": Purpose.domain,
    "concepts": Purpose.concepts,
}
# The teacher assistant under either name (ADR-080 §4: its share of the cap counts both).
ASSISTANT_PURPOSES: frozenset[Purpose] = frozenset({Purpose.assistant, Purpose.assist})


# Issue 29 item 5: the purposes each calling service may spend on (its bus user, learnt by the
# gateway from the subject `llm.v1.complete.<user>`), and those that bill someone other than the
# person acting (the poll billing its teacher), the only ones a caller may set `billed_to` for.
CALLER_PURPOSES: dict[str, frozenset[Purpose]] = {
    "editor-assist": frozenset({Purpose.generate}),
    "review": frozenset({Purpose.review}),
    "poll": frozenset({Purpose.poll}),
    "lesson-fix": frozenset({Purpose.lesson_fix}),
    # The platform's own calls (FACTS E2) that none of our services makes: its connection test,
    # grading, the assistant (either name), descriptions, domain labels, concepts.
    "platform": frozenset(
        {
            Purpose.test,
            Purpose.grade,
            Purpose.assist,
            Purpose.assistant,
            Purpose.describe,
            Purpose.domain,
            Purpose.concepts,
        }
    ),
}
BILLING_PURPOSES: frozenset[Purpose] = frozenset({Purpose.poll})


class Effort(StrEnum):
    """How much the model should spend on its answer (text, tool input, thinking).

    Sent as the provider's `output_config.effort` when the purpose's model reports that level
    in its Models API capabilities; for a model without effort support (Haiku 4.5) it is only
    recorded in the ledger. It never changes `max_output_tokens` or the worst case held.
    """

    low = "low"
    medium = "medium"
    high = "high"


class LlmMessage(WireModel):
    """One turn of the conversation sent to the model."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class OutputSchema(WireModel):
    """A structured output: the reply is validated against json_schema (a JSON Schema object)."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$", description="Tool name given to the model.")
    json_schema: dict[str, Any] = Field(description="JSON Schema of the output; type object.")
    description: str | None = Field(default=None, description="What the output is, for the model.")


class CompleteRequest(WireModel):
    """`llm.v1.complete` request."""

    purpose: Purpose
    user: str | None = Field(description="The person acting; null for scheduled work.")
    billed_to: str | None = Field(
        default=None, description="Who pays; defaults to user (a poll's calls: its teacher)."
    )
    effort: Effort = Effort.low
    system: str | None = None
    messages: list[LlmMessage] = Field(min_length=1)
    output_schema: OutputSchema | None = Field(
        default=None, description="Structured output; null for free text."
    )
    max_output_tokens: int = Field(default=1024, ge=1, le=64_000)
    request_id: str | None = Field(
        default=None, max_length=200, description="Idempotency key: a repeat gets the same reply."
    )
    deadline_s: float | None = Field(
        default=None, gt=0, le=600, description="The caller's deadline; retries stop before it."
    )
    deadline_at: datetime | None = Field(
        default=None,
        description=(
            "The caller's absolute deadline (UTC; clocks kept by NTP): no provider request "
            "starts after it, even when the message reached the gateway late (a paused or "
            "backlogged replica). The gateway's deadline is the earlier of this and its receipt "
            "plus deadline_s. quiz_servicekit.llm.LlmClient sets it from deadline_s."
        ),
    )

    @property
    def payer(self) -> str | None:
        """Who the call is billed to."""
        return self.billed_to if self.billed_to is not None else self.user


class Usage(WireModel):
    """Tokens and cost of a call, summed over its attempts."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    # Finite (pydantic refuses NaN and infinities for a Decimal) and never negative (issue 29).
    cost_usd: Annotated[Usd, Field(ge=0)]
    # Issue 31 (prompt caching), additive in v1: how many of `input_tokens` were read from the
    # provider's prompt cache (billed 0.1 × the input price) and written to it (1.25 ×).
    cache_read_input_tokens: int = Field(
        default=0,
        ge=0,
        description="Of input_tokens, read from the prompt cache (0.1 × the input price).",
    )
    cache_creation_input_tokens: int = Field(
        default=0,
        ge=0,
        description="Of input_tokens, written to the prompt cache (1.25 × the input price).",
    )


class CompleteReply(WireModel):
    """`llm.v1.complete` reply: a schema-valid object, or text when no schema was asked."""

    output: dict[str, Any] | str
    model: str
    usage: Usage
    attempts: int = Field(description="Provider requests made (2 after one unreadable reply).")
    call_id: str
    stop_reason: str | None = Field(
        default=None,
        description=(
            "Why the model stopped (the provider's stop_reason: end_turn, tool_use, max_tokens, "
            "refusal…). A free-text output with `max_tokens` was cut by max_output_tokens; a "
            "structured output is never returned cut (llm_failed instead)."
        ),
    )
    # Issue 31 item 6 (additive in v1): the quota left, so a caller can say so before the next.
    remaining_usd: Usd | None = Field(
        default=None,
        description=(
            "The day's cap minus what is spent and held, after this call (USD, the Zurich day); "
            "null when the gateway could not read it."
        ),
    )
    remaining_calls: int | None = Field(
        default=None,
        ge=0,
        description=(
            "This person's calls left for the purpose in the current rate window, after this "
            "one; null when the call has no per-person limit (no person, or a limit of 0)."
        ),
    )


class AvailabilityRequest(WireModel):
    """`llm.v1.availability` request; purpose narrows the answer to one purpose."""

    purpose: Purpose | None = None


class AvailabilityReply(WireModel):
    """Whether a model can be called now: provider configured, circuit closed, cap not spent."""

    available: bool
    reason: ErrorCode | None = Field(
        default=None,
        description="llm_not_configured, llm_budget_exhausted or llm_failed (circuit open).",
    )
    circuit: Literal["closed", "open", "half_open"] = "closed"
    models: dict[Purpose, str] = Field(description="Per purpose, the model it calls.")
    remaining_usd: Usd
    retry_after_s: float | None = Field(default=None, description="When an open circuit retries.")
    providers: dict[Purpose, str] = Field(
        default_factory=dict,
        description=(
            "Per purpose, who runs its model, as pages name it (issue 31): `Anthropic`, or the "
            "self-hosted OpenAI-compatible server's name (OPENAI_COMPAT_PROVIDER_NAME, else its "
            "base URL's host). Empty from a gateway older than issue 31."
        ),
    )
    residency: Literal["any", "local"] = Field(
        default="any",
        description=(
            "LLM_DATA_RESIDENCY: `local` when only self-hosted models may be called (a purpose "
            "whose model is not local answers llm_not_configured)."
        ),
    )


class UsageRequest(WireModel):
    """`llm.v1.usage` request: today (Europe/Zurich) unless day is given."""

    day: date | None = None
    billed_to: str | None = Field(default=None, description="Also report this payer's spend.")
    estimate: CompleteRequest | None = Field(
        default=None,
        description=(
            "Also report the worst case the gateway would hold for exactly this request "
            "(ADR-060 §5: a caller's share uses the gateway's own formula, never a second one)."
        ),
    )
    prompt_chars: int | None = Field(
        default=None,
        ge=0,
        description=(
            "With `estimate`: the prompt's size as the platform's night counts it (FACTS E: "
            "characters, UTF-16 units, of the config's JSON + the explanation + the system "
            "prompt); the reply's `share_estimate_usd` is then the platform's worst case."
        ),
    )


class SpendLine(WireModel):
    """Calls, tokens and cost of a slice of the ledger."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Usd = Decimal(0)


class PurposeSpend(WireModel):
    """A purpose's spend, split by whether a person made the call (ADR-060 §5 needs no_person)."""

    total: SpendLine = Field(default_factory=SpendLine)
    person: SpendLine = Field(default_factory=SpendLine)
    no_person: SpendLine = Field(default_factory=SpendLine)


class PurposeHeld(WireModel):
    """Open reservations (in-flight calls at their worst case) of a purpose, by person / none."""

    person: Usd = Decimal(0)
    no_person: Usd = Decimal(0)


class UsageReply(WireModel):
    """`llm.v1.usage` reply: the day's cap, spend, open reservations and remaining budget."""

    day: date
    timezone: str = "Europe/Zurich"
    cap_usd: Usd
    spent_usd: Usd
    reserved_usd: Usd
    remaining_usd: Usd
    by_purpose: dict[Purpose, PurposeSpend]
    billed_to: str | None = None
    billed_to_spend: dict[Purpose, SpendLine] | None = None
    held_by_purpose: dict[Purpose, PurposeHeld] = Field(
        default_factory=dict,
        description=(
            "Open reservations of the day by purpose, split by whether a person (user) made the "
            "call; their sum is reserved_usd (up to holds of an unknown purpose)."
        ),
    )
    estimate_usd: Usd | None = Field(
        default=None,
        description=(
            "The worst case the gateway would hold for the request's `estimate` (model of its "
            "purpose, prices, max_output_tokens, prompt size); null without one."
        ),
    )
    share_estimate_usd: Usd | None = Field(
        default=None,
        description=(
            "The worst case of `estimate` as the platform's night computes it (FACTS E): "
            "(ceil(prompt_chars / 3) × input price + max_output_tokens × output price) / 10⁶ at "
            "the purpose's model's price; null without `estimate` and `prompt_chars`."
        ),
    )


__all__ = [
    "ASSISTANT_PURPOSES",
    "BILLING_PURPOSES",
    "CALLER_PURPOSES",
    "PLATFORM_PURPOSES",
    "AvailabilityReply",
    "AvailabilityRequest",
    "CompleteReply",
    "CompleteRequest",
    "Effort",
    "LlmMessage",
    "OutputSchema",
    "Purpose",
    "PurposeHeld",
    "PurposeSpend",
    "SpendLine",
    "Usage",
    "UsageReply",
    "UsageRequest",
]
