"""editor-assist: app factory and entry point (`quiz-editor-assist [serve|migrate]`)."""

from __future__ import annotations

from fastapi import FastAPI

from quiz_contracts.topology import GENERATE_SETTLED_TTL_S
from quiz_editor_assist import api, handlers, settled
from quiz_editor_assist.config import Settings
from quiz_editor_assist.docs import install_docs
from quiz_editor_assist.metrics import EditorAssistMetrics
from quiz_editor_assist.runner_quota import PersonQuota
from quiz_editor_assist.service import GenerateService
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service
from quiz_servicekit.lease import open_lease_bucket

NAME = "editor-assist"
VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The editor-assist app: NATS and micro registration happen in its lifespan."""
    settings = settings or Settings()
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="The Generate wand of the question editor (ADR-059)",
        settings=settings,
    )
    metrics = EditorAssistMetrics(runtime.metrics)
    service = ServiceRef[GenerateService]("Generate service")
    runtime.add_endpoints(handlers.endpoints(service))

    async def on_startup(rt: ServiceRuntime) -> None:
        # The settled runs, shared by every replica (quiz_editor_assist.settled).
        # Provisioned by operations (quiz_contracts.topology, its TTL the bucket's): opened,
        # never made (issue 29 item 1).
        kv, _ = await open_lease_bucket(rt.js, settled.BUCKET, ttl_s=GENERATE_SETTLED_TTL_S)
        rt.watch_stream(f"KV_{settled.BUCKET}")
        service.set(
            GenerateService(
                rt.nc,
                metrics,
                llm_deadline_s=settings.llm_deadline_s,
                runner_timeout_s=settings.runner_timeout_s,
                settled=settled.SettledRuns(kv, max_bytes=rt.nc.max_payload - 4096),
                quota=PersonQuota(settings.runner_per_person),
                lint_timeout_s=settings.lint_timeout_s,
            )
        )

    app = create_service_app(runtime, routers=[api.router], on_startup=on_startup)
    # The routes reach the service through the app (quiz_editor_assist.deps), not a closure.
    app.state.generate = service
    install_docs(app)
    return app


def run() -> None:
    """Console entry point: `quiz-editor-assist`."""
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
