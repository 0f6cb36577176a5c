"""runner: app factory and entry point."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from fastapi import FastAPI

from quiz_runner.api import slots_router
from quiz_runner.config import RunnerSettings
from quiz_runner.handlers import endpoints
from quiz_runner.languages import Toolchain
from quiz_runner.metrics import RunnerMetrics
from quiz_runner.sandbox.base import Sandbox, ensure_init, watch_children_with_pidfds
from quiz_runner.sandbox.bwrap import BwrapSandbox
from quiz_runner.service import CompileLimits, RunnerService
from quiz_runner.slots import Slots
from quiz_runner.uids import UidClaim, claim_uids
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service

NAME = "runner"
VERSION = "0.1.0"
log = logging.getLogger(__name__)


def build_sandbox(settings: RunnerSettings) -> Sandbox:
    """The configured backend, with its init built (and, for docker, its image imported)."""
    state = Path(settings.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    init = ensure_init(state)
    if settings.backend == "docker":
        from quiz_runner.sandbox import docker as docker_backend

        client = docker_backend.connect_or_start(settings.docker_host)
        image = docker_backend.ensure_image(client, init)
        return docker_backend.DockerSandbox(client, image)
    return BwrapSandbox(init, settings.bwrap_path)


def create_app(settings: RunnerSettings | None = None) -> FastAPI:
    """The runner app: the sandbox is built and the micro service registered in its lifespan."""
    settings = settings or RunnerSettings()
    service = ServiceRef[RunnerService]("runner")
    # Held for the process's life: dropping the claim would close its lock files.
    claims: list[UidClaim] = []
    runtime = ServiceRuntime(
        name=NAME,
        version=VERSION,
        description="Runs reference programs on test cases in a sandbox (ADR-059 settle)",
        settings=settings,
    )
    runtime.add_endpoints(endpoints(service, settings.slots))
    metrics = RunnerMetrics(runtime.metrics)

    async def on_startup(rt: ServiceRuntime) -> None:
        watch_children_with_pidfds()
        # Claimed before anything runs; UidsUnavailable stops the start-up with its reason.
        uids = claim_uids(
            settings.slots, settings.uid_base, settings.uid_range, Path(settings.uid_lock_dir)
        )
        claims.append(uids)
        log.info("runner: slot uids %s (locks in %s)", uids.uids, uids.lock_dir)
        sandbox = await asyncio.to_thread(build_sandbox, settings)
        runner = RunnerService(
            sandbox,
            Slots(settings.slots, settings.busy_retry_after_s),
            Path(settings.state_dir),
            tools=Toolchain(python=settings.python),
            compile_limits=CompileLimits(
                wall_s=settings.compile_wall_s,
                cpu_s=settings.compile_cpu_s,
                memory_mb=settings.compile_memory_mb,
                processes=settings.compile_processes,
                output_bytes=settings.compile_output_bytes,
            ),
            uids=uids,
            metrics=metrics,
        )
        service.set(runner)
        log.info(
            "runner: %s backend, %d slots, languages %s",
            sandbox.name,
            settings.slots,
            [lang.value for lang in runner.languages()],
        )

        async def sandbox_ready() -> bool:
            return service().sandbox.ready()[0]

        rt.add_ready_check("sandbox", sandbox_ready)

    return create_service_app(runtime, routers=[slots_router(service)], on_startup=on_startup)


def run() -> None:
    """Console entry point: `quiz-runner`."""
    run_service(create_app, RunnerSettings())


if __name__ == "__main__":
    run()
