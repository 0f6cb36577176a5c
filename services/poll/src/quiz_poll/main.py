"""poll: app factory and entry point (`quiz-poll [serve|migrate]`)."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_poll import pages
from quiz_poll.config import Settings
from quiz_poll.models import MIGRATIONS
from quiz_servicekit.app import ServiceRuntime, create_service_app, run_service

NAME = "poll"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The poll app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Brainstorm poll and its AI moderation (ADR-071)",
        settings=settings,
        migrations=MIGRATIONS,
    )
    return create_service_app(runtime, routers=[pages.router])


def run() -> None:
    """Console entry point: `quiz-poll`."""
    run_service(create_app, Settings())


if __name__ == "__main__":
    run()
