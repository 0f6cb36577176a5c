"""Settings of lesson-fix (env prefix LESSON_FIX_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """AI lesson fixes."""

    model_config = SettingsConfigDict(
        env_prefix="LESSON_FIX_", extra="ignore", populate_by_name=True
    )
