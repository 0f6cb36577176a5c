"""llm-gateway: app factory and entry point (`quiz-llm-gateway [serve|migrate]`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import FastAPI

from quiz_llm_gateway.api import admin_router
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.handlers import endpoints
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.models import MIGRATIONS
from quiz_llm_gateway.provider import AnthropicProvider
from quiz_llm_gateway.repository import Repository
from quiz_llm_gateway.service import Gateway
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
    gateway = ServiceRef[Gateway]("gateway")
    runtime.add_endpoints(endpoints(gateway, settings.complete_concurrency))
    metrics = GatewayMetrics(runtime.metrics)
    provider: AnthropicProvider | None = None
    sweeper: asyncio.Task[None] | None = None

    async def on_startup(rt: ServiceRuntime) -> None:
        nonlocal provider, sweeper
        if settings.anthropic_api_key:
            provider = AnthropicProvider(
                settings.anthropic_api_key, settings.anthropic_base_url, settings.provider_timeout_s
            )
        else:
            log.warning("no ANTHROPIC_API_KEY: every call answers llm_not_configured")
        gateway.set(Gateway(settings, Repository(rt.db), provider, metrics))
        await gateway().sweep()
        sweeper = asyncio.create_task(_sweep_forever(gateway(), settings))

    async def on_shutdown(_rt: ServiceRuntime) -> None:
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        if gateway.is_set:
            await gateway().sweep()
        if provider is not None:
            await provider.close()

    return create_service_app(
        runtime, routers=[admin_router(gateway)], on_startup=on_startup, on_shutdown=on_shutdown
    )


async def _sweep_forever(gateway: Gateway, settings: Settings) -> None:
    """Release expired holds and refresh the gauges, every sweep interval."""
    while True:
        await asyncio.sleep(settings.sweep_interval_s)
        try:
            await gateway.sweep()
        except Exception:
            log.exception("sweep failed")


def run() -> None:
    """Console entry point: `quiz-llm-gateway` serves; `quiz-llm-gateway migrate` migrates."""
    run_service(create_app, Settings())


if __name__ == "__main__":
    run()
