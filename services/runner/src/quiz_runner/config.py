"""Settings of runner (env prefix RUNNER_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """Sandboxed execution of reference code on test cases."""

    model_config = SettingsConfigDict(env_prefix="RUNNER_", extra="ignore", populate_by_name=True)
