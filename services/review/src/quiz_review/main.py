"""review: app factory and entry point (`quiz-review [serve|migrate]`)."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_review.config import Settings
from quiz_review.models import MIGRATIONS
from quiz_servicekit.app import ServiceRuntime, create_service_app, run_service

NAME = "review"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The review app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="LLM review of published questions (ADR-060)",
        settings=settings,
        migrations=MIGRATIONS,
    )
    return create_service_app(runtime)


def run() -> None:
    """Console entry point: `quiz-review`."""
    run_service(create_app, Settings())


if __name__ == "__main__":
    run()
