"""Settings of review (env prefix REVIEW_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """LLM review of published questions (ADR-060)."""

    model_config = SettingsConfigDict(env_prefix="REVIEW_", extra="ignore", populate_by_name=True)
