"""Settings of the gateway (env prefix LLM_GATEWAY_; the plain ADR names are accepted too)."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from quiz_contracts.llm import Purpose
from quiz_llm_gateway.domain.journal_mac import check_key
from quiz_llm_gateway.domain.pricing import PLATFORM_DEFAULT_MODEL
from quiz_servicekit.settings import ServiceSettings

# The platform's models (FACTS E2, issue 31): its default (`DEFAULT_LLM_MODEL`) for every
# purpose but the poll, which takes Haiku (its `PURPOSE_MODELS`).
DEFAULT_SONNET = PLATFORM_DEFAULT_MODEL
DEFAULT_HAIKU = "claude-haiku-4-5"

DEFAULT_PURPOSE_MODELS: dict[str, str] = {
    p.value: (DEFAULT_HAIKU if p is Purpose.poll else DEFAULT_SONNET) for p in Purpose
}

# Per (person, purpose) per minute. ADR-059 §5 and ADR-060 §1: ten for the wand and "Review now".
# The platform's own purposes (issue 31) have no limit of its own: ours are a person's clicks
# (ten a minute, like the wand), the assistant under both names 30, grading 60 (a teacher's
# exam, answer after answer).
DEFAULT_RATE_LIMITS: dict[str, int] = {
    "generate": 10,
    "review": 10,
    "lesson_fix": 10,
    "assistant": 30,
    "assist": 30,
    "poll": 60,
    "test": 10,
    "grade": 60,
    "describe": 10,
    "domain": 10,
    "concepts": 10,
}


def _alias(name: str) -> AliasChoices:
    return AliasChoices(f"LLM_GATEWAY_{name}", name)


def _json_object(value: Any) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return json.loads(value) if value else {}
    return value


class Settings(ServiceSettings):
    """Everything the gateway reads from the environment (NATS, DB, HTTP: the shared names)."""

    model_config = SettingsConfigDict(
        env_prefix="LLM_GATEWAY_", extra="ignore", populate_by_name=True
    )

    anthropic_api_key: str | None = Field(
        default=None, validation_alias=_alias("ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=_alias("ANTHROPIC_BASE_URL")
    )
    daily_cap_usd: Decimal = Field(
        default=Decimal("20"), ge=0, validation_alias=_alias("LLM_DAILY_CAP_USD")
    )
    purpose_models: dict[str, str] = Field(
        default_factory=dict, validation_alias=_alias("PURPOSE_MODELS")
    )
    model_prices: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        validation_alias=_alias("MODEL_PRICES"),
        description="Model → {input, output} USD per MTok, merged on the defaults.",
    )
    rate_limits: dict[str, int] = Field(
        default_factory=dict,
        validation_alias=_alias("LLM_RATE_LIMITS"),
        description="Per purpose, calls per person per minute, merged on the defaults; 0 = none.",
    )
    rate_window_s: float = 60.0
    fallback_models: dict[str, list[str]] = Field(
        default_factory=dict,
        validation_alias=_alias("LLM_FALLBACK_MODELS"),
        description=(
            'Model → the models that answer in its place, in order (`{"claude-sonnet-5-5": '
            '["claude-haiku-4-5"]}`): after its retries on 429/529/5xx, or with its circuit '
            "open (issue 31)."
        ),
    )
    assistant_share: Decimal | None = Field(
        default=None,
        ge=0,
        le=1,
        validation_alias=_alias("LLM_ASSISTANT_SHARE"),
        description=(
            "The teacher assistant's share of the day's cap (ADR-080 §4, the platform's "
            "shareAllows), 0 to 1: its calls (`assist`, `assistant`) pass only while its own "
            "spend + the call's worst case ≤ share × cap and the day's total + the worst case "
            "≤ cap − share × cap; unset: no share, the cap alone."
        ),
    )
    max_in_flight: int = Field(
        default=512,
        ge=1,
        description=(
            "Provider requests in flight per replica: calls/s wanted × p99 model latency "
            "(s), e.g. 50 calls/s × 10 s = 500."
        ),
    )
    complete_concurrency: int = Field(
        default=1024, ge=1, description="llm.v1.complete requests in hand at once per replica."
    )
    db_threads: int = Field(
        default=8,
        ge=1,
        validation_alias=_alias("DB_THREADS"),
        description="Worker threads (and pooled connections) for transactions.",
    )
    default_deadline_s: float = 60.0
    provider_timeout_s: float = 120.0
    provider_path: Literal["lean", "sdk"] = Field(
        default="lean",
        description=(
            "How a Messages request is sent: `lean` (the SDK's URL and headers, one aiohttp "
            "POST, the JSON read as is) or `sdk` (client.messages.create); same replies."
        ),
    )
    prompt_cache: bool = Field(
        default=True,
        description=(
            "Mark a request's stable prefix (system prompt, else the forced tool) for "
            "Anthropic's prompt cache when it reaches the model's cacheable minimum (issue 31)."
        ),
    )
    provider_max_retries: int = Field(default=3, ge=0)
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    circuit_failures: int = 5
    circuit_cooldown_s: float = 30.0
    reservation_grace_s: float = Field(
        default=120.0, description="A reservation outlives its call's deadline by this much."
    )
    sweep_interval_s: float = 15.0
    cap_slice_calls: int = Field(
        default=16,
        ge=0,
        description=(
            "A replica leases a slice of the day's remaining cap worth this many worst cases "
            "of the call that asks, and admits against it in memory (issue 24); 0 = every call "
            "admitted in its own transaction."
        ),
    )
    cap_slice_share: int = Field(
        default=4, ge=1, description="A slice takes at most 1/share of the unreserved cap."
    )
    cap_slice_min_calls: int = Field(
        default=2,
        ge=1,
        description="Below this many worst cases a slice is not leased: the call is exact.",
    )
    cap_slice_ttl_s: float = Field(
        default=300.0,
        gt=0,
        description=(
            "A slice lives this long unless renewed (every cap_slice_keep_s): a killed "
            "replica's slice is returned by a sweep at most this long after its last renewal."
        ),
    )
    cap_slice_idle_s: float = Field(
        default=2.0, ge=0, description="A slice with no call in flight for this long goes back."
    )
    cap_slice_keep_s: float = Field(
        default=1.0, gt=0, description="How often idle slices are returned and others renewed."
    )
    idempotency_ttl_s: float = 600.0
    settle_journal_dir: str | None = Field(
        default=None,
        description=(
            "Directory of the settle write-ahead journal (default $QUIZ_DATA_DIR/"
            "llm-gateway-journal, QUIZ_DATA_DIR defaulting to .data); keep it on a disk that "
            "outlives the process."
        ),
    )
    settle_timeout_s: float = Field(
        default=5.0, gt=0, description="A settle the database has not taken by then is journaled."
    )
    journal_publish_timeout_s: float = Field(
        default=3.0,
        gt=0,
        description=(
            "A journal entry JetStream has not acknowledged by then goes to the local journal "
            "file instead."
        ),
    )
    journal_key: SecretStr | None = Field(
        default=None,
        description=(
            "LLM_GATEWAY_JOURNAL_KEY: the HMAC-SHA256 key of the JetStream journal's entries "
            "(issue 29; at least 32 bytes, e.g. 64 hex digits), the same on every replica and "
            "held by the gateway alone (a Secret; `make run` generates one under .data). Without "
            "it (nor a key file) a replica signs with a key of its own: only it can replay what "
            "it journaled, said at start and in /readyz."
        ),
    )
    journal_key_file: str | None = Field(
        default=None,
        description="LLM_GATEWAY_JOURNAL_KEY_FILE: a file holding the journal key (one line).",
    )
    outage_retry_after_s: float = Field(
        default=2.0,
        gt=0,
        description="The retry_after_s of `unavailable` while the database cannot be reached.",
    )

    # -- issue 31: the self-hosted OpenAI-compatible provider and data residency -------------
    openai_compat_base_url: str | None = Field(
        default=None,
        validation_alias=_alias("OPENAI_COMPAT_BASE_URL"),
        description=(
            "OPENAI_COMPAT_BASE_URL: a self-hosted OpenAI-compatible server (vLLM, llama.cpp's "
            "server, Ollama, LocalAI), e.g. http://llm.school.ch:8000/v1; it serves every "
            "`openai-compat/<model>` of PURPOSE_MODELS."
        ),
    )
    openai_compat_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=_alias("OPENAI_COMPAT_API_KEY"),
        description="OPENAI_COMPAT_API_KEY: that server's key, if it asks one (vLLM --api-key).",
    )
    openai_compat_structured: Literal["tools", "json_schema", "json_object"] = Field(
        default="tools",
        validation_alias=_alias("OPENAI_COMPAT_STRUCTURED"),
        description=(
            "How structured output goes to that server: `tools` (a forced function call) or "
            "`json_schema` (response_format), or `json_object` (response_format with a schema, "
            "for llama-cpp-python's server); validated alike."
        ),
    )
    openai_compat_provider_name: str | None = Field(
        default=None,
        validation_alias=_alias("OPENAI_COMPAT_PROVIDER_NAME"),
        description=(
            "Who the pages say runs the self-hosted models (e.g. `Ollama`); default the base "
            "URL's host."
        ),
    )
    llm_model_prices: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=_alias("LLM_MODEL_PRICES"),
        description=(
            'LLM_MODEL_PRICES: {"model": [input, output]} USD per million tokens, merged last; '
            "0 allowed; every openai-compat/ model needs one."
        ),
    )
    data_residency: Literal["any", "local"] = Field(
        default="any",
        validation_alias=_alias("LLM_DATA_RESIDENCY"),
        description=(
            "LLM_DATA_RESIDENCY: `local` calls only the self-hosted server (never Anthropic); "
            "a purpose whose model is not local answers llm_not_configured."
        ),
    )

    def journal_secret(self) -> bytes | None:
        """The journal key's bytes (the setting, else the file's first line), None when unset.
        ValueError for one shorter than 32 bytes."""
        text: str | None = None
        if self.journal_key is not None:
            text = self.journal_key.get_secret_value().strip()
        elif self.journal_key_file:
            with open(self.journal_key_file, encoding="utf-8") as f:
                text = f.readline().strip()
        if not text:
            return None
        return check_key(text.encode())

    def journal_dir(self) -> str:
        """Where the settle journal lives."""
        if self.settle_journal_dir:
            return self.settle_journal_dir
        return os.path.join(self.data_dir, "llm-gateway-journal")

    @field_validator(
        "purpose_models",
        "model_prices",
        "rate_limits",
        "fallback_models",
        "llm_model_prices",
        mode="before",
    )
    @classmethod
    def _parse_json(cls, value: Any) -> Any:
        return _json_object(value)

    def models(self) -> dict[str, str]:
        """Purpose → model, the defaults overridden by PURPOSE_MODELS."""
        unknown = set(self.purpose_models) - {p.value for p in Purpose}
        if unknown:
            raise ValueError(f"PURPOSE_MODELS names unknown purposes: {sorted(unknown)}")
        return {**DEFAULT_PURPOSE_MODELS, **self.purpose_models}

    def limits(self) -> dict[str, int]:
        """Purpose → calls per person per window."""
        return {**DEFAULT_RATE_LIMITS, **self.rate_limits}
