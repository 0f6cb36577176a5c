"""Settings of poll (env prefix POLL_; shared settings use their plain names)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """Brainstorm poll and its AI moderation (ADR-071)."""

    model_config = SettingsConfigDict(env_prefix="POLL_", extra="ignore", populate_by_name=True)

    # Live frames: at most one per poll per interval, so a burst of answers is one frame.
    frame_interval_s: float = Field(default=0.25, gt=0, le=5)
    # SSE keep-alive comment period (proxies close idle streams).
    keepalive_s: float = Field(default=15.0, gt=0)
    # The AI job runs this long after the answer that claimed the lease (ADR-072 §12: 3 s).
    ai_job_delay_s: float = Field(default=3.0, ge=0)
    # Each model call's deadline (the gateway retries within it).
    ai_deadline_s: float = Field(default=60.0, gt=0)
    # Whether a model can be called is asked of the gateway at most this often.
    availability_ttl_s: float = Field(default=5.0, ge=0)
    # A poll nobody used this long (no request, no stream, no pass) leaves the replica's memory.
    idle_evict_s: float = Field(default=900.0, gt=0)
    # Open SSE streams one participant (a grant's attempt, else a user) may hold on a replica,
    # and one token: a phone page is one stream, a teacher's wall and board two, with room for
    # a second tab and a reconnect the server has not noticed yet; past it, 429 rate_limited.
    sse_per_participant: int = Field(default=4, ge=1, le=1000)
    sse_per_token: int = Field(default=8, ge=1, le=1000)
    # The freeze sweep (30 days after close): how often each replica looks.
    freeze_every_s: float = Field(default=3600.0, gt=0)
