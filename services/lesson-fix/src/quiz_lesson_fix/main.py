"""lesson-fix: app factory and entry point (`quiz-lesson-fix [serve|migrate]`)."""

from __future__ import annotations

import gc
import logging

from fastapi import FastAPI

from quiz_lesson_fix import api, handlers
from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.metrics import LessonFixMetrics
from quiz_lesson_fix.models import MIGRATIONS
from quiz_lesson_fix.repository import RateLimitRepository
from quiz_lesson_fix.service import LessonFixService
from quiz_lesson_fix.verification import HumanVerifier, SiteverifyClient
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service
from quiz_servicekit.llm import LlmClient

NAME = "lesson-fix"
VERSION = "0.1.0"
# Buckets full again hold nothing: forget them now and then (any replica may; it is idempotent).
RATE_LIMIT_PRUNE_S = 600.0

log = logging.getLogger(__name__)

VERIFICATION_OFF = (
    "DISABLED (LESSON_FIX_VERIFY_DISABLED=true): fix requests skip human verification. "
    "Development only; never in production."
)


def verifier_of(settings: Settings) -> HumanVerifier | None:
    """The siteverify client, or None when verification is switched off."""
    if settings.verify_disabled:
        return None
    assert settings.verify_secret is not None  # Settings.verification_problem said so
    return SiteverifyClient(
        settings.verify_url,
        settings.verify_secret.get_secret_value(),
        hostnames=settings.verify_hostnames,
        timeout_s=settings.verify_timeout_s,
    )


# A lesson request allocates some 100,000 small containers (its JSON, its models, the checks'
# records) that all live until it ends. At Python's default first threshold (700) the collector
# runs ~150 times per 300,000-character lesson, re-scanning survivors and finding no garbage:
# ~50 ms of CPU, a third of the request (bench/lesson_checks.py, docs/performance.md).
GC_THRESHOLDS = (50_000, 20, 10)


def tune_garbage_collection() -> None:
    """Freeze what the imports built and collect young objects rarely (a service process only:
    `run()` calls it, an app served inside another process leaves that process's collector)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The lesson-fix app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="AI lesson fixes: the lesson checks and Fix with AI",
        settings=settings,
        migrations=MIGRATIONS,
    )
    metrics = LessonFixMetrics(runtime.metrics)
    service = ServiceRef[LessonFixService]("lesson-fix service")
    runtime.add_endpoints(handlers.endpoints(service))
    runtime.add_periodic(
        "rate_limit_prune", RATE_LIMIT_PRUNE_S, lambda: service().prune_rate_limits()
    )

    async def on_startup(rt: ServiceRuntime) -> None:
        problem = settings.verification_problem()
        if problem is not None:
            raise RuntimeError(problem)
        if settings.verify_disabled:
            log.warning("!" * 78)
            log.warning("HUMAN VERIFICATION IS %s", VERIFICATION_OFF)
            log.warning("!" * 78)
            rt.add_ready_detail("human_verification", VERIFICATION_OFF)
        service.set(
            LessonFixService(
                llm=LlmClient(rt.nc),
                verifier=verifier_of(settings),
                limits=RateLimitRepository(rt.db),
                settings=settings,
                metrics=metrics,
            )
        )

    async def on_shutdown(_: ServiceRuntime) -> None:
        if service.is_set:
            await service().aclose()

    app = create_service_app(
        runtime, routers=[api.router], on_startup=on_startup, on_shutdown=on_shutdown
    )
    # The routes reach the service through the app (quiz_lesson_fix.deps), not a closure.
    app.state.lessons = service
    return app


def run() -> None:
    """Console entry point: `quiz-lesson-fix` (the process's own collector tuned first)."""
    tune_garbage_collection()
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
