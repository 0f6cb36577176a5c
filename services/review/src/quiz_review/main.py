"""review: app factory and entry point (`quiz-review [serve|migrate]`)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI

from quiz_contracts import subjects
from quiz_contracts.review import ReviewCompleted
from quiz_contracts.topology import REVIEW_LEASE_BUCKET
from quiz_review import api, consumers, handlers
from quiz_review.config import Settings
from quiz_review.domain.iwf.text import warm as warm_lint
from quiz_review.metrics import ReviewMetrics
from quiz_review.models import MIGRATIONS
from quiz_review.repository import ReviewRepository
from quiz_review.service import Clock, ReviewService, utc_now
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service
from quiz_servicekit.jetstream import publish
from quiz_servicekit.lease import KvLease, default_holder_id, open_lease_bucket
from quiz_servicekit.llm import LlmClient

NAME = "review"
VERSION = "0.1.0"
LEASE_BUCKET = REVIEW_LEASE_BUCKET
NIGHT_LEASE_KEY = "night"

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, clock: Clock = utc_now) -> FastAPI:
    """The review app: NATS, database, streams, consumers and the night start in its lifespan.

    `clock` (an aware datetime) is the service's time: tests place the night at chosen instants.
    """
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="LLM review of published questions (ADR-060)",
        settings=settings,
        migrations=MIGRATIONS,
    )
    metrics = ReviewMetrics(runtime.metrics)
    service = ServiceRef[ReviewService]("review service")
    runtime.add_endpoints(handlers.endpoints(service))
    # It publishes its completed events there (provisioned by operations, checked at start).
    runtime.use_stream(subjects.REVIEW_EVENTS_STREAM)
    for spec in consumers.consumers(service, settings):
        runtime.add_consumer(spec)
    # The task llm.review: hourly, working only inside the Zurich window, under the lease.
    runtime.add_periodic(
        "llm.review",
        settings.night_interval_s,
        lambda: service().run_night(),
        run_at_start=settings.night_at_start,
    )

    async def on_startup(rt: ServiceRuntime) -> None:
        # The lint's lemmatiser reads a dictionary per language on first use (seconds, German's
        # the largest): now, in a worker thread so the NATS connection's loop keeps beating,
        # not on the first request.
        await asyncio.to_thread(warm_lint)
        js = rt.js
        # The bucket is provisioned by operations (its TTL the topology's): opened, never made.
        kv, ttl_s = await open_lease_bucket(js, LEASE_BUCKET, ttl_s=settings.lease_ttl_s)
        rt.watch_stream(f"KV_{LEASE_BUCKET}")
        lease = KvLease(kv, NIGHT_LEASE_KEY, holder=default_holder_id(NAME), ttl_s=ttl_s)

        async def publish_completed(event: ReviewCompleted, msg_id: str) -> None:
            await publish(js, subjects.REVIEW_COMPLETED, event, msg_id=msg_id)

        service.set(
            ReviewService(
                repo=ReviewRepository(rt.db),
                llm=LlmClient(rt.nc),
                publish=publish_completed,
                settings=settings,
                metrics=metrics,
                lease=lease,
                clock=clock,
            )
        )

    app = create_service_app(runtime, routers=[api.router], on_startup=on_startup)
    # The routes reach the service through the app (quiz_review.deps); so do tests and the bench
    # (e.g. to run the night now).
    app.state.review = service
    return app


def run() -> None:
    """Console entry point: `quiz-review`."""
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
