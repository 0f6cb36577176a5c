"""Settings of editor-assist (env prefix EDITOR_ASSIST_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """The Generate wand of the question editor (ADR-059)."""

    model_config = SettingsConfigDict(
        env_prefix="EDITOR_ASSIST_", extra="ignore", populate_by_name=True
    )
