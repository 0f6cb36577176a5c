"""llm-gateway: app factory and entry point (`quiz-llm-gateway [serve|migrate]`)."""

from __future__ import annotations

import logging
import secrets

from fastapi import FastAPI

from quiz_contracts import subjects
from quiz_llm_gateway.api import admin_router
from quiz_llm_gateway.call.anthropic import AnthropicProvider
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.handlers import endpoints
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.rows.tables import MIGRATIONS
from quiz_llm_gateway.service import Gateway
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
    provider: AnthropicProvider | None = None

    async def on_startup(rt: ServiceRuntime) -> None:
        nonlocal provider
        if settings.anthropic_api_key:
            provider = AnthropicProvider(
                settings.anthropic_api_key,
                settings.anthropic_base_url,
                settings.provider_timeout_s,
                settings.provider_path,
            )
        else:
            log.warning("no ANTHROPIC_API_KEY: every call answers llm_not_configured")
        # Whether a model can be called at all, stated by /readyz (ready either way: without a
        # key the gateway still answers, with llm_not_configured). Never the key itself.
        rt.add_ready_detail("provider", provider_detail(settings))
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
        gateway.set(Gateway(settings, Repository(rt.db), provider, metrics, journal_stream=journal))
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


def provider_detail(settings: Settings) -> dict[str, object]:
    """/readyz's `details.provider`: `{"configured": true, "base_url": ...}` with a key,
    `{"configured": false, "calls_answer": "llm_not_configured", "why": ...}` without."""
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
    run_service(create_app, Settings())


if __name__ == "__main__":
    run()
