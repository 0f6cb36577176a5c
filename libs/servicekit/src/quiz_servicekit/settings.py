"""Settings shared by every service; a service subclasses with its own env prefix for its fields."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal, Self

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from quiz_contracts.limits import HTTP_MAX_BODY_BYTES
from quiz_servicekit.http_protocol import (
    BODY_IDLE_TIMEOUT_S,
    HEAD_TIMEOUT_S,
    KEEP_ALIVE_S,
    MAX_CONNECTIONS,
)


def _env(name: str) -> AliasChoices:
    """Shared settings read their plain, unprefixed environment names (NATS_URL, DATABASE_URL…)."""
    return AliasChoices(name.lower(), name)


class ServiceSettings(BaseSettings):
    """What every service needs to run: NATS, HTTP, database, JWT keys, logging."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # One server or a comma-separated list of a cluster's nodes (quiz_servicekit.natsio).
    nats_url: str = Field("nats://127.0.0.1:4222", validation_alias=_env("NATS_URL"))
    # Replicas of every stream, dead-letter stream and KV bucket the service declares (1 on a
    # single node, 3 on a 3-node cluster); a stream found with fewer is scaled up at start.
    nats_stream_replicas: int = Field(1, ge=1, le=5, validation_alias=_env("NATS_STREAM_REPLICAS"))
    # The locked bus (quiz_contracts.bus, docs/operations.md "The locked bus"): this service's
    # NATS user and password; or a directory holding `<service>.password` files (dev, tests:
    # the user is then the service's name). Explicit NATS_USER/NATS_PASSWORD win.
    nats_user: str | None = Field(None, validation_alias=_env("NATS_USER"))
    nats_password: str | None = Field(None, validation_alias=_env("NATS_PASSWORD"))
    nats_credentials_dir: str | None = Field(None, validation_alias=_env("NATS_CREDENTIALS_DIR"))
    # TLS to NATS (`tls://` URLs, or any URL when a CA is named): the CA bundle to trust, and
    # a client certificate and key where the server verifies clients.
    nats_tls_ca_file: str | None = Field(None, validation_alias=_env("NATS_TLS_CA_FILE"))
    nats_tls_cert_file: str | None = Field(None, validation_alias=_env("NATS_TLS_CERT_FILE"))
    nats_tls_key_file: str | None = Field(None, validation_alias=_env("NATS_TLS_KEY_FILE"))
    http_host: str = Field("127.0.0.1", validation_alias=_env("HTTP_HOST"))
    # 0 picks a free port; the bound port is what $SRV.INFO advertises.
    http_port: int = Field(0, validation_alias=_env("HTTP_PORT"))
    # The base URL ops should use (behind a Service or ingress); defaults to the bound address.
    public_url: str | None = Field(None, validation_alias=_env("PUBLIC_URL"))
    database_url: str | None = Field(None, validation_alias=_env("DATABASE_URL"))
    # Where a service keeps files of its own (the SQLite fallback, the gateway's journal).
    data_dir: str = Field(".data", validation_alias=_env("QUIZ_DATA_DIR"))
    # Worker threads (and pooled connections) that run the service's transactions.
    db_threads: int = Field(8, ge=1, validation_alias=_env("DB_THREADS"))
    # Off when a Kubernetes Job runs `<service> migrate` before the rollout.
    migrate_on_startup: bool = Field(True, validation_alias=_env("MIGRATE_ON_STARTUP"))
    # A request body over this is refused with 413 before it is read whole; routes may differ.
    http_max_body_bytes: int = Field(
        HTTP_MAX_BODY_BYTES, ge=0, validation_alias=_env("HTTP_MAX_BODY_BYTES")
    )
    # `production` (the prod overlay) refuses to start without JWT_ISSUER, JWT_AUDIENCE and a
    # key set: a token the identity provider signed for another application must not pass
    # (issue 29, item 3). `development` checks `iss`/`aud` only where they are set.
    quiz_env: Literal["development", "production"] = Field(
        "development", validation_alias=_env("QUIZ_ENV")
    )
    # The HTTP edge against slow clients (quiz_servicekit.http_protocol, issue 29 item 7): the
    # request line and headers within HTTP_HEAD_TIMEOUT_S, a body pausing at most
    # HTTP_BODY_IDLE_TIMEOUT_S between reads, an idle kept-alive connection closed after
    # HTTP_KEEP_ALIVE_S, at most HTTP_MAX_CONNECTIONS open at once (503 past it).
    http_head_timeout_s: float = Field(
        HEAD_TIMEOUT_S, gt=0, le=HEAD_TIMEOUT_S, validation_alias=_env("HTTP_HEAD_TIMEOUT_S")
    )
    http_body_idle_timeout_s: float = Field(
        BODY_IDLE_TIMEOUT_S, gt=0, validation_alias=_env("HTTP_BODY_IDLE_TIMEOUT_S")
    )
    http_keep_alive_s: int = Field(KEEP_ALIVE_S, ge=1, validation_alias=_env("HTTP_KEEP_ALIVE_S"))
    http_max_connections: int = Field(
        MAX_CONNECTIONS, ge=1, validation_alias=_env("HTTP_MAX_CONNECTIONS")
    )
    jwks_file: str | None = Field(None, validation_alias=_env("JWKS_FILE"))
    jwks_url: str | None = Field(None, validation_alias=_env("JWKS_URL"))
    jwt_issuer: str | None = Field(None, validation_alias=_env("JWT_ISSUER"))
    jwt_audience: str | None = Field(None, validation_alias=_env("JWT_AUDIENCE"))
    # JWKS_URL (quiz_servicekit.jwks): the longest a request waits for keys (an unknown `kid`,
    # or none fetched yet), the fetch's own deadline, the fewest seconds between two refreshes
    # an unknown `kid` may trigger, and how long fetched keys are used before a background
    # refresh (the old keys keep answering meanwhile).
    jwks_wait_s: float = Field(2.0, gt=0, le=2.0, validation_alias=_env("JWKS_WAIT_S"))
    jwks_fetch_timeout_s: float = Field(5.0, gt=0, validation_alias=_env("JWKS_FETCH_TIMEOUT_S"))
    jwks_min_refresh_s: float = Field(30.0, ge=0, validation_alias=_env("JWKS_MIN_REFRESH_S"))
    jwks_cache_s: float = Field(300.0, gt=0, validation_alias=_env("JWKS_CACHE_S"))
    log_level: str = Field("INFO", validation_alias=_env("LOG_LEVEL"))
    # Requests handled at once per NATS endpoint; more wait in the subscription's queue.
    nats_max_concurrency: int = Field(256, validation_alias=_env("NATS_MAX_CONCURRENCY"))

    @model_validator(mode="after")
    def _production_checks_tokens(self) -> Self:
        """QUIZ_ENV=production: JWT_ISSUER, JWT_AUDIENCE and JWKS_FILE or JWKS_URL, or no start."""
        if self.quiz_env == "production":
            missing = [
                name
                for name, value in (
                    ("JWT_ISSUER", self.jwt_issuer),
                    ("JWT_AUDIENCE", self.jwt_audience),
                    ("JWKS_FILE or JWKS_URL", self.jwks_file or self.jwks_url),
                )
                if not value
            ]
            if missing:
                raise ValueError(
                    f"QUIZ_ENV=production needs {', '.join(missing)}: without them a token "
                    "signed for another application would be accepted (docs/security.md, Tokens)"
                )
        return self


# pydantic-settings' words for an environment variable that does not decode (JSON, mostly).
_UNPARSED = re.compile(r'error parsing value for field "(\w+)" from source "\w+"')


def refusal_reason(error: ValueError, settings: Callable[[], Any]) -> str:
    """Why `settings()` (a settings class) or a service's `create_app` refused to start, in one
    line for a person: each of pydantic's errors as `NAME: what is wrong (got 'value')`, a
    variable that does not decode as `NAME is not valid JSON (…)` — NAME the environment
    variable as it is set (its alias, else the prefix and the field) —, anything else as it
    says (the service's own messages name their setting)."""
    if isinstance(error, ValidationError) and error.errors():
        return "; ".join(_invalid(settings, e) for e in error.errors())
    why = " ".join(str(error).split())
    unparsed = _UNPARSED.fullmatch(why)
    if unparsed is not None:
        name = _env_name(settings, unparsed.group(1))
        cause = error.__cause__
        said = "is not valid JSON" if isinstance(cause, json.JSONDecodeError) else "does not parse"
        why = f"{name} {said}" + (f" ({' '.join(str(cause).split())})" if cause else "")
    return why


def _invalid(settings: Callable[[], Any], e: Any) -> str:
    """One of pydantic's errors as `NAME: what is wrong (got 'its value')`."""
    loc = [str(part) for part in e.get("loc", ())]
    fields: dict[str, Any] = getattr(settings, "model_fields", {})
    # pydantic names a field by the alias it was read under (LLM_GATEWAY_X) or by its name.
    field = next(
        (name for name, info in fields.items() if loc and loc[0] in _names_of(name, info)), None
    )
    name = _env_name(settings, field) if field else (loc[0] if loc else "settings")
    where = ".".join([name, *loc[1:]])
    got = e.get("input")
    return f"{where}: {e.get('msg', 'invalid')}" + (f" (got {got!r})" if got is not None else "")


def _names_of(field: str, info: Any) -> set[str]:
    alias = getattr(info, "validation_alias", None)
    choices = [alias] if isinstance(alias, str) else getattr(alias, "choices", [])
    return {field, *(c for c in choices if isinstance(c, str))}


def _env_name(settings: Callable[[], Any], field: str) -> str:
    """The environment variable of `field`: its alias (the shortest of its choices: the bare
    name beside a prefixed one), else the prefix and the name, upper-cased."""
    fields: dict[str, Any] = getattr(settings, "model_fields", {})
    names = _names_of(field, fields.get(field)) - {field}
    if names:
        return min(names, key=len)
    prefix = str(getattr(settings, "model_config", {}).get("env_prefix", ""))
    return (prefix + field).upper()
