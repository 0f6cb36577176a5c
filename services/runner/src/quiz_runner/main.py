"""runner: app factory and entry point."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_runner.config import Settings
from quiz_servicekit.app import ServiceRuntime, create_service_app, serve

NAME = "runner"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The runner app: NATS and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Sandboxed execution of reference code on test cases",
        settings=settings,
        needs_db=False,
    )
    return create_service_app(runtime)


def run() -> None:
    """Console entry point: `quiz-runner`."""
    settings = Settings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    run()
