"""lesson-fix: app factory and entry point (`quiz-lesson-fix [serve|migrate]`)."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_lesson_fix.config import Settings
from quiz_lesson_fix.models import MIGRATIONS
from quiz_servicekit.app import ServiceRuntime, create_service_app, run_service

NAME = "lesson-fix"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The lesson-fix app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="AI lesson fixes",
        settings=settings,
        migrations=MIGRATIONS,
    )
    return create_service_app(runtime)


def run() -> None:
    """Console entry point: `quiz-lesson-fix`."""
    run_service(create_app, Settings())


if __name__ == "__main__":
    run()
