"""llm-gateway: app factory and entry point (`quiz-llm-gateway [serve|migrate]`)."""

from __future__ import annotations

import logging
import secrets

from fastapi import FastAPI

from quiz_contracts import subjects
from quiz_llm_gateway.api import admin_router
from quiz_llm_gateway.call.anthropic import AnthropicProvider
from quiz_llm_gateway.call.openai_compat import OpenAICompatProvider
from quiz_llm_gateway.call.registry import ClosableProvider, Providers
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.providers import (
    ANTHROPIC,
    OPENAI_COMPAT,
    ProviderKind,
    refused_purposes,
)
from quiz_llm_gateway.handlers import endpoints
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.rows.tables import MIGRATIONS
from quiz_llm_gateway.service import Gateway, provider_name
from quiz_llm_gateway.settlement.stream_journal import StreamJournal
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service

NAME = "llm-gateway"
VERSION = "0.1.0"
log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The llm-gateway app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    # Fail at start-up, not at the first call: a purpose whose model has no price is an error.
    Gateway.check_settings(settings)
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Every LLM call: caps, purposes, per-user limits, attribution",
        settings=settings,
        migrations=MIGRATIONS,
    )
    # The settle journal any replica replays: provisioned by operations (quiz_contracts.topology),
    # checked at start.
    runtime.use_stream(subjects.LLM_JOURNAL_STREAM)
    gateway = ServiceRef[Gateway]("gateway")
    runtime.add_endpoints(endpoints(gateway, settings.complete_concurrency))
    metrics = GatewayMetrics(runtime.metrics)
    metrics.known(settings.models())
    provider: Providers | None = None

    async def on_startup(rt: ServiceRuntime) -> None:
        nonlocal provider
        provider = build_providers(settings)
        # Whether a model can be called at all, stated by /readyz (ready either way: without a
        # key the gateway still answers, with llm_not_configured). Never the key itself.
        rt.add_ready_detail("provider", provider_detail(settings))
        rt.add_ready_detail("openai_compat", openai_compat_detail(settings))
        rt.add_ready_detail("residency", residency_detail(settings))
        key = settings.journal_secret()
        if key is None:
            # Development without a key: this replica's entries replay on this replica only.
            key = secrets.token_hex(32).encode()
            log.warning(
                "no LLM_GATEWAY_JOURNAL_KEY: journal entries signed with a key of this process "
                "(another replica cannot replay them)"
            )
        configured = settings.journal_secret() is not None
        rt.add_ready_detail(
            "journal_key",
            "configured" if configured else "ephemeral: LLM_GATEWAY_JOURNAL_KEY unset",
        )
        journal = StreamJournal(
            rt.js,
            timeout_s=settings.journal_publish_timeout_s,
            key=key,
            on_rejected=lambda reason: metrics.journal_rejected.labels(reason).inc(),
        )
        gateway.set(
            Gateway(
                settings,
                Repository(rt.db),
                provider if provider else None,
                metrics,
                journal_stream=journal,
            )
        )
        # Release expired holds and refresh the gauges: once now, then every sweep interval.
        rt.add_periodic("sweep", settings.sweep_interval_s, gateway().sweep, run_at_start=True)
        # This replica's slices of the cap: idle ones returned, the others renewed.
        rt.add_periodic("cap-slices", settings.cap_slice_keep_s, gateway().slices.keep)

    async def on_shutdown(_rt: ServiceRuntime) -> None:
        # A last sweep, after the periodic task has stopped: holds released before we go.
        if gateway.is_set:
            await gateway().close()
        if provider is not None:
            await provider.close()

    return create_service_app(
        runtime, routers=[admin_router(gateway)], on_startup=on_startup, on_shutdown=on_shutdown
    )


def build_providers(settings: Settings) -> Providers:
    """The replica's provider clients (issue 31): Anthropic with a key, unless
    LLM_DATA_RESIDENCY=local (then never built, so never called); the self-hosted server with
    a base URL. Says at start which ones, and which purposes residency refuses."""
    clients: dict[ProviderKind, ClosableProvider] = {}
    local = settings.data_residency == "local"
    if settings.anthropic_api_key and not local:
        clients[ANTHROPIC] = AnthropicProvider(
            settings.anthropic_api_key,
            settings.anthropic_base_url,
            settings.provider_timeout_s,
            settings.provider_path,
            prompt_cache=settings.prompt_cache,
        )
    if settings.openai_compat_base_url:
        key = settings.openai_compat_api_key
        clients[OPENAI_COMPAT] = OpenAICompatProvider(
            settings.openai_compat_base_url,
            key.get_secret_value() if key is not None else None,
            settings.provider_timeout_s,
            settings.openai_compat_structured,
        )
    if local:
        refused = refused_purposes(settings.models(), "local")
        log.log(
            logging.WARNING if refused or not settings.openai_compat_base_url else logging.INFO,
            "LLM_DATA_RESIDENCY=local: only the self-hosted server at %s is called, never "
            "Anthropic; refused purposes (llm_not_configured): %s",
            settings.openai_compat_base_url or "(OPENAI_COMPAT_BASE_URL unset: none)",
            ", ".join(f"{p} -> {m}" for p, m in refused.items()) or "none",
        )
    elif not clients:
        log.warning(
            "no ANTHROPIC_API_KEY nor OPENAI_COMPAT_BASE_URL: every call answers llm_not_configured"
        )
    return Providers(clients)


def openai_compat_detail(settings: Settings) -> dict[str, object]:
    """/readyz's `details.openai_compat`: the self-hosted server, never its key."""
    if not settings.openai_compat_base_url:
        return {"configured": False, "why": "OPENAI_COMPAT_BASE_URL is not set"}
    return {
        "configured": True,
        "base_url": settings.openai_compat_base_url,
        "structured": settings.openai_compat_structured,
        "name": provider_name(settings, "openai-compat/"),
    }


def residency_detail(settings: Settings) -> dict[str, object]:
    """/readyz's `details.residency`: LLM_DATA_RESIDENCY and the purposes it refuses."""
    return {
        "setting": settings.data_residency,
        "refused_purposes": refused_purposes(settings.models(), settings.data_residency),
    }


def provider_detail(settings: Settings) -> dict[str, object]:
    """/readyz's `details.provider` (Anthropic): `{"configured": true, "base_url": ...}` with a
    key, `{"configured": false, "calls_answer": "llm_not_configured", "why": ...}` without or
    under LLM_DATA_RESIDENCY=local."""
    if settings.data_residency == "local":
        return {
            "configured": False,
            "calls_answer": "llm_not_configured",
            "why": "LLM_DATA_RESIDENCY=local: Anthropic is never called",
        }
    if settings.anthropic_api_key:
        return {
            "configured": True,
            "kind": "anthropic",
            "base_url": settings.anthropic_base_url or "https://api.anthropic.com",
        }
    return {
        "configured": False,
        "calls_answer": "llm_not_configured",
        "why": "ANTHROPIC_API_KEY is not set",
    }


def run() -> None:
    """Console entry point: `quiz-llm-gateway` serves; `quiz-llm-gateway migrate` migrates."""
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
