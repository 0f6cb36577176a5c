"""Settings of poll (env prefix POLL_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """Brainstorm poll and its AI moderation (ADR-071)."""

    model_config = SettingsConfigDict(env_prefix="POLL_", extra="ignore", populate_by_name=True)
