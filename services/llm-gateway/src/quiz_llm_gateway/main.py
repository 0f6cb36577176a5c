"""llm-gateway: app factory and entry point."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import FastAPI

from quiz_llm_gateway.api import admin_router
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.db import MIGRATIONS
from quiz_llm_gateway.handlers import endpoints
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.provider import AnthropicProvider
from quiz_llm_gateway.repository import Repository
from quiz_llm_gateway.service import Gateway
from quiz_servicekit.app import ServiceRuntime, create_service_app, serve

NAME = "llm-gateway"
VERSION = "0.1.0"
log = logging.getLogger(__name__)


class _Holder:
    """The gateway of this process, built in the lifespan once NATS and the DB are up."""

    gateway: Gateway | None = None
    provider: AnthropicProvider | None = None
    sweeper: asyncio.Task[None] | None = None

    def get(self) -> Gateway:
        assert self.gateway is not None, "the gateway is built in the lifespan"
        return self.gateway


def create_app(settings: Settings | None = None) -> FastAPI:
    """The llm-gateway app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    # Fail at start-up, not at the first call: a purpose whose model has no price is an error.
    Gateway.check_settings(settings)
    holder = _Holder()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Every LLM call: caps, purposes, per-user limits, attribution",
        settings=settings,
        migrations=MIGRATIONS,
    )
    for spec in endpoints(holder.get, settings.complete_concurrency):
        runtime.add_endpoint(spec)

    async def on_startup(rt: ServiceRuntime) -> None:
        if settings.anthropic_api_key:
            holder.provider = AnthropicProvider(
                settings.anthropic_api_key, settings.anthropic_base_url, settings.provider_timeout_s
            )
        else:
            log.warning("no ANTHROPIC_API_KEY: every call answers llm_not_configured")
        holder.gateway = Gateway(
            settings,
            Repository(rt.database_url or "", threads=settings.db_threads),
            holder.provider,
            GatewayMetrics(rt.metrics.registry, rt.metrics.prefix),
        )
        await holder.gateway.sweep()
        holder.sweeper = asyncio.create_task(_sweep_forever(holder.gateway, settings))

    async def on_shutdown(_rt: ServiceRuntime) -> None:
        if holder.sweeper is not None:
            holder.sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder.sweeper
        if holder.gateway is not None:
            await holder.gateway.sweep()
        if holder.provider is not None:
            await holder.provider.close()
        if holder.gateway is not None:
            holder.gateway.repo.close()

    return create_service_app(
        runtime, routers=[admin_router(holder.get)], on_startup=on_startup, on_shutdown=on_shutdown
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
    """Console entry point: `quiz-llm-gateway`."""
    settings = Settings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    run()
