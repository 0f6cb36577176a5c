"""poll: app factory and entry point (`quiz-poll [serve|migrate]`)."""

from __future__ import annotations

import time

from fastapi import FastAPI

from quiz_poll import api, consumers, handlers, pages
from quiz_poll.bus import PollBus
from quiz_poll.config import Settings
from quiz_poll.metrics import PollMetrics
from quiz_poll.models import MIGRATIONS
from quiz_poll.repository import PollRepository
from quiz_poll.service import Clock, PollService
from quiz_poll.tokens import CachingVerifier
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service
from quiz_servicekit.llm import LlmClient

NAME = "poll"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None, *, clock: Clock = time.time) -> FastAPI:
    """The poll app: NATS, database and micro registration happen in its lifespan.

    `clock` (epoch seconds) is the service's time: the AI cool-down and the 30-day freeze read
    it, so tests move it by hand.
    """
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Brainstorm poll and its AI moderation (ADR-071)",
        settings=settings,
        migrations=MIGRATIONS,
    )
    metrics = PollMetrics(runtime.metrics)
    service = ServiceRef[PollService]("poll service")
    runtime.add_endpoints(handlers.endpoints(service))
    for consumer in consumers.consumers(service):
        runtime.add_consumer(consumer)
    # Any replica may sweep: each freeze is one conditional UPDATE (the first one wins).
    runtime.add_periodic(
        "freeze", settings.freeze_every_s, lambda: service().freeze_due(), run_at_start=True
    )

    runtime.add_periodic(
        "evict_idle",
        min(60.0, settings.idle_evict_s),
        lambda: _evict(service, settings.idle_evict_s),
    )

    async def on_startup(rt: ServiceRuntime) -> None:
        bus = PollBus(rt.nc, rt.js)
        poll = PollService(
            repo=PollRepository(rt.db),
            bus=bus,
            llm=LlmClient(rt.nc),
            metrics=metrics,
            frame_interval_s=settings.frame_interval_s,
            keepalive_s=settings.keepalive_s,
            ai_job_delay_s=settings.ai_job_delay_s,
            ai_deadline_s=settings.ai_deadline_s,
            availability_ttl_s=settings.availability_ttl_s,
            sse_per_participant=settings.sse_per_participant,
            sse_per_token=settings.sse_per_token,
            clock=clock,
        )
        await poll.start()
        # Another replica's change of a poll held here: heard on its frames, read again.
        await bus.listen(poll.remote_frame)
        service.set(poll)

    async def on_shutdown(_: ServiceRuntime) -> None:
        if service.is_set:
            await service().bus.aclose()
            await service().aclose()

    app = create_service_app(
        runtime,
        # The pages are static shells of this API (issue 16): no data, no token on their route.
        routers=[api.router, pages.router],
        on_startup=on_startup,
        on_shutdown=on_shutdown,
    )
    # Phones send the same token on every Add and Remove: its signature is checked once.
    app.state.jwt_verifier = CachingVerifier(app.state.jwt_verifier)
    # The routes reach the service through the app (quiz_poll.deps), not a closure.
    app.state.poll = service
    return app


async def _evict(service: ServiceRef[PollService], idle_s: float) -> int:
    return service().evict_idle(idle_s)


def run() -> None:
    """Console entry point: `quiz-poll`."""
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
