"""Settings of editor-assist (env prefix EDITOR_ASSIST_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """The Generate wand of the question editor (ADR-059)."""

    model_config = SettingsConfigDict(
        env_prefix="EDITOR_ASSIST_", extra="ignore", populate_by_name=True
    )

    # The model's whole turn, retries included, must fit: the teacher is waiting on the button.
    llm_deadline_s: float = Field(default=60.0, gt=0)
    # Compile once + every case under the runner's own limits, plus the queueing on NATS.
    runner_timeout_s: float = Field(default=45.0, gt=0)
    # Settle runs of one person at once on a replica (quiz_editor_assist.runner_quota).
    runner_per_person: int = Field(default=2, ge=1)
    # The lint of the proposal (review.v1.lint, issue 30): sub-millisecond at the review, so a
    # short wait; past it the proposal comes back without findings.
    lint_timeout_s: float = Field(default=2.0, gt=0, le=30)
