"""A service whose one migration waits at a gate the test holds: replicas race to migrate."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from quiz_servicekit.app import ServiceRuntime, create_service_app, run_service
from quiz_servicekit.settings import ServiceSettings

NAME = "kit-migrating"
MIGRATIONS = Path(__file__).parent / "migrations"


def create_app(settings: ServiceSettings) -> FastAPI:
    runtime = ServiceRuntime(
        name=NAME,
        version="0.1.0",
        description="migration race",
        settings=settings,
        migrations=MIGRATIONS,
    )
    return create_service_app(runtime)


if __name__ == "__main__":
    run_service(create_app, ServiceSettings)
