"""Settings of lesson-fix (env prefix LESSON_FIX_; shared settings use their plain names)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings

# Cloudflare Turnstile's siteverify; any compatible verifier (hCaptcha's, a proxy) takes its URL.
TURNSTILE_SITEVERIFY_URL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"


class Settings(ServiceSettings):
    """AI lesson fixes: human verification, the per-person rate limit, the model call."""

    model_config = SettingsConfigDict(
        env_prefix="LESSON_FIX_", extra="ignore", populate_by_name=True
    )

    # Human verification before any costly work (seed 003; the tool's turnstile.js).
    verify_url: str = TURNSTILE_SITEVERIFY_URL
    verify_secret: SecretStr | None = None
    # Hostnames a solved challenge may come from (the siteverify reply's `hostname`); comma
    # separated. Empty: any hostname (the verifier's own site key binding is then the check).
    verify_hostnames: Annotated[list[str], NoDecode] = Field(default_factory=list)
    verify_timeout_s: float = Field(default=10.0, gt=0)
    # Development only: no verification at all, announced at start-up and in /readyz.
    verify_disabled: bool = False

    # Fixes per person per window, shared by every replica (a token bucket in the database).
    # A fix is one token however many model tries it takes (seed 003 "Cost and limits").
    rate_limit: int = Field(default=10, ge=0, description="0: no limit.")
    rate_window_s: float = Field(default=60.0, gt=0)

    # Each model try's own deadline (the gateway retries within it); a fix makes up to two.
    llm_deadline_s: float = Field(default=90.0, gt=0)
    max_output_tokens: int = Field(default=4000, ge=256, le=64_000)
    # Full lesson checks run in worker threads, this many at once per replica, so a 300,000-
    # character lesson never holds the event loop (they queue beyond it).
    check_threads: int = Field(default=2, ge=1)

    @field_validator("verify_hostnames", mode="before")
    @classmethod
    def _split_hostnames(cls, value: object) -> object:
        if isinstance(value, str):
            return [h.strip() for h in value.split(",") if h.strip()]
        return value

    def verification_problem(self) -> str | None:
        """Why the service cannot start as configured, or None (checked at start-up)."""
        secret = self.verify_secret.get_secret_value() if self.verify_secret else ""
        if not self.verify_disabled and not secret.strip():
            return (
                "LESSON_FIX_VERIFY_SECRET is required (the siteverify secret key); set "
                "LESSON_FIX_VERIFY_DISABLED=true only for development"
            )
        return None
