"""runner: app factory and entry point."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from fastapi import FastAPI

from quiz_contracts.runner import MAX_REPLY_BYTES, MESSAGE_HEADROOM
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_runner import api
from quiz_runner.config import Settings
from quiz_runner.handlers import endpoints
from quiz_runner.languages import Toolchain
from quiz_runner.metrics import RunnerMetrics
from quiz_runner.sandbox.base import Sandbox, ensure_init, watch_children_with_pidfds
from quiz_runner.sandbox.bwrap import BwrapSandbox
from quiz_runner.service import CompileLimits, RunnerService, self_test
from quiz_runner.slots import Slots
from quiz_runner.uids import UidClaim, claim_uids
from quiz_servicekit.app import ServiceRef, ServiceRuntime, create_service_app, run_service

NAME = "runner"
VERSION = "0.1.0"
log = logging.getLogger(__name__)

# What /readyz says of the isolation without root (docs/runner.md, "Without root").
ROOTLESS_WEAKER = (
    "every slot runs its sandboxes as the runner's own uid: a namespace escape lands on that "
    "user's account rather than on an empty uid, and may signal the runner and the other "
    "slots' processes; the limits, namespaces (each request's pid namespace reaps all its "
    "processes when it ends, as with root), read-only toolchain and tmpfs quotas are the same"
)


def build_sandbox(settings: Settings) -> Sandbox:
    """The configured backend, with its init built (and, for docker, its image imported)."""
    state = settings.state_path()
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(
            f"cannot create the runner's state dir {state} (RUNNER_STATE_DIR): {exc.strerror}"
        ) from None
    init = ensure_init(state)
    if settings.backend == "docker":
        from quiz_runner.sandbox import docker as docker_backend

        client = docker_backend.connect_or_start(settings.docker_host)
        image = docker_backend.ensure_image(client, init)
        return docker_backend.DockerSandbox(client, image, state)
    return BwrapSandbox(init, settings.bwrap_path)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The runner app: the sandbox is built and the micro service registered in its lifespan."""
    settings = settings or Settings()
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
        uids, rootless = _slot_uids(settings, claims)
        sandbox = await asyncio.to_thread(build_sandbox, settings)
        # A sandbox that cannot start stops the runner now, saying why, not at the first job.
        await self_test(sandbox, uids[0])
        reply_bytes = _reply_bytes(rt.nc.max_payload)
        runner = _runner_service(settings, sandbox, uids, metrics, reply_bytes)
        service.set(runner)
        rt.ready_details["isolation"] = {
            "backend": sandbox.name,
            "mode": "rootless" if rootless else "per-slot uids",
            "uids": sorted(set(uids)),
            **({"weaker": ROOTLESS_WEAKER} if rootless else {}),
        }
        log.info(
            "runner: %s backend, %d slots, languages %s, replies up to %d bytes",
            sandbox.name,
            settings.slots,
            [lang.value for lang in runner.languages()],
            reply_bytes,
        )

        async def sandbox_ready() -> bool:
            return service().sandbox.ready()[0]

        rt.add_ready_check("sandbox", sandbox_ready)

    app = create_service_app(runtime, routers=[api.router], on_startup=on_startup)
    # The routes reach the service through the app (quiz_runner.deps), not a closure.
    app.state.runner = service
    return app


def _slot_uids(settings: Settings, claims: list[UidClaim]) -> tuple[list[int], bool]:
    """The slots' uids, and whether the runner is rootless (one uid, its own, for all).

    As root the uids are claimed (the claim appended to `claims`, held for the process's life)
    before anything runs; `UidsUnavailable` stops the start-up with its reason.
    """
    if os.geteuid() != 0:
        if settings.backend == "docker":
            raise RuntimeError("the docker backend needs root (RUNNER_BACKEND=bwrap does not)")
        # One uid for every slot, ours: nothing to claim, and nothing is ever swept.
        uids = [os.geteuid()] * settings.slots
        log.warning("runner: not root: every slot runs as uid %d (%s)", uids[0], "rootless")
        return uids, True
    claim = claim_uids(
        settings.slots,
        settings.uid_base,
        settings.uid_range,
        Path(settings.uid_lock_dir) if settings.uid_lock_dir else None,
    )
    claims.append(claim)
    log.info("runner: slot uids %s (locks in %s)", claim.uids, claim.lock_dir)
    return claim.uids, False


def _reply_bytes(max_payload: int) -> int:
    """The largest reply, in bytes: MAX_REPLY_BYTES, or less on a server taking less."""
    reply_bytes = min(MAX_REPLY_BYTES, max_payload - MESSAGE_HEADROOM)
    if max_payload < NATS_MAX_PAYLOAD:
        log.warning(
            "runner: the NATS server takes messages of %d bytes, under the %d our "
            "configurations set (max_payload): replies are kept within %d bytes",
            max_payload,
            NATS_MAX_PAYLOAD,
            reply_bytes,
        )
    return reply_bytes


def _runner_service(
    settings: Settings,
    sandbox: Sandbox,
    uids: list[int],
    metrics: RunnerMetrics,
    reply_bytes: int,
) -> RunnerService:
    return RunnerService(
        sandbox,
        Slots(settings.slots, settings.busy_retry_after_s),
        settings.state_path(),
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
        reply_bytes=reply_bytes,
    )


def run() -> None:
    """Console entry point: `quiz-runner`."""
    run_service(create_app, Settings)


if __name__ == "__main__":
    run()
