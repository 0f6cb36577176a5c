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
