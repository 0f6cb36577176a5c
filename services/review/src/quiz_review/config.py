"""Settings of review (env prefix REVIEW_; shared settings use their plain names)."""

from __future__ import annotations

from decimal import Decimal

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from quiz_review.domain.night import DEFAULT_NIGHT_SHARE, NIGHT_BATCH
from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """LLM review of published questions (ADR-060)."""

    model_config = SettingsConfigDict(env_prefix="REVIEW_", extra="ignore", populate_by_name=True)

    # ADR-060 §5 names the variable LLM_REVIEW_NIGHT_SHARE; REVIEW_NIGHT_SHARE is accepted too.
    night_share: Decimal = Field(
        default=DEFAULT_NIGHT_SHARE,
        ge=0,
        le=1,
        validation_alias=AliasChoices(
            "night_share", "LLM_REVIEW_NIGHT_SHARE", "REVIEW_NIGHT_SHARE"
        ),
    )
    # Versions looked at per hourly run of the night.
    night_batch: int = Field(default=NIGHT_BATCH, ge=1, le=10_000)

    # How often the night task wakes (it works only inside the Zurich window, ADR-060 §5).
    night_interval_s: float = Field(default=3600.0, gt=0)
    # Run the night once at start-up too (inside the window), not only an interval later.
    night_at_start: bool = True
    # The night's lease: a crashed holder's lease expires after this many seconds. The bucket's
    # TTL is provisioned (quiz_contracts.topology.REVIEW_LEASE_TTL_S); where they differ the
    # bucket's applies (logged): the server expires entries by it.
    lease_ttl_s: float = Field(default=30.0, gt=1)
    # Each review call's deadline (the gateway retries within it).
    llm_deadline_s: float = Field(default=120.0, gt=0, le=600)
    # review.v1.requests: redelivered after ack_wait without an ack (a crashed replica), at most
    # max_deliver times; this many handled at once per replica.
    request_ack_wait_s: float = Field(default=30.0, gt=0)
    request_max_deliver: int = Field(default=5, ge=1)
    request_concurrency: int = Field(default=4, ge=1, le=256)
    # Kept for compatibility (REVIEW_DECLARE_QUESTIONS_STREAM): review declares no stream any
    # more; provisioning creates QUESTIONS when missing (issue 29 item 1).
    declare_questions_stream: bool = True
