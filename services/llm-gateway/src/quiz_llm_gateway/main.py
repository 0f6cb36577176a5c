"""llm-gateway: app factory and entry point."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_llm_gateway.config import Settings
from quiz_servicekit.app import ServiceRuntime, create_service_app, serve

NAME = "llm-gateway"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The llm-gateway app: NATS, database and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Every LLM call: caps, purposes, per-user limits, attribution",
        settings=settings,
        needs_db=True,
    )
    return create_service_app(runtime)


def run() -> None:
    """Console entry point: `quiz-llm-gateway`."""
    settings = Settings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    run()
