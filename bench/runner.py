"""Runner bench: sandbox overhead, cases per second with every slot busy, compile once vs per case.

Run as root from the repo root: `uv run python bench/runner.py [--backend bwrap|docker]`.
Prints a Markdown table of the figures (copied into docs/runner.md, "Performance").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from quiz_contracts.runner import RunCase, RunFile, RunLimits, RunRequest
from quiz_runner.languages import Toolchain
from quiz_runner.sandbox.base import Sandbox, ensure_init, watch_children_with_pidfds
from quiz_runner.sandbox.bwrap import BwrapSandbox
from quiz_runner.service import RunnerService
from quiz_runner.slots import Slots
from quiz_runner.uids import claim_uids

HELLO = 'print("hello")\n'
C_HELLO = '#include <stdio.h>\nint main(void){ puts("hello"); return 0; }\n'
# Hellos print 6 bytes; 20 cases may ask at most max_output_bytes(20) = 26,214 each.
LIMITS = RunLimits(cpu_s=2, wall_s=10, memory_mb=256, processes=16, output_bytes=4096)
N = 20


def hello_request(cases: int, language: str = "python") -> RunRequest:
    path, source = ("main.py", HELLO) if language == "python" else ("main.c", C_HELLO)
    return RunRequest(
        language=language,
        files=[RunFile(path=path, content=source)],
        cases=[RunCase(name=f"c{i}") for i in range(cases)],
        limits=LIMITS,
    )


async def bare_python(times: int, script: Path) -> list[float]:
    """Seconds per `python3 -B -E -s main.py`, outside any sandbox."""
    python = Toolchain().python
    out = []
    for _ in range(times):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            python, "-B", "-E", "-s", str(script), stdout=asyncio.subprocess.PIPE
        )
        await proc.communicate()
        out.append(time.perf_counter() - start)
    return out


async def sandboxed_cases(service: RunnerService, cases: int) -> float:
    """Seconds per case of one request of `cases` hellos, the compile step subtracted."""
    start = time.perf_counter()
    reply = await service.run(hello_request(cases))
    total = time.perf_counter() - start
    assert all(c.stdout == "hello\n" for c in reply.cases), reply
    return (total - reply.compile.wall_ms / 1000) / cases


async def throughput(service: RunnerService, cases_per_request: int, seconds: float) -> float:
    """Cases per second with one client per slot, each sending requests back to back."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            reply = await service.run(hello_request(cases_per_request))
            done += len(reply.cases)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(service.slots.total)))
    return done / (time.perf_counter() - start)


async def compile_once_vs_per_case(service: RunnerService) -> tuple[float, float]:
    """Seconds for 20 C cases: one request of 20, and 20 requests of one (compile each time)."""
    start = time.perf_counter()
    reply = await service.run(hello_request(N, "c"))
    once = time.perf_counter() - start
    assert reply.compile.ok and len(reply.cases) == N
    start = time.perf_counter()
    for _ in range(N):
        await service.run(hello_request(1, "c"))
    return once, time.perf_counter() - start


def build(backend: str, state: Path) -> Sandbox:
    init = ensure_init(state)
    if backend == "docker":
        from quiz_runner.sandbox import docker as docker_backend

        client = docker_backend.connect_or_start()
        return docker_backend.DockerSandbox(client, docker_backend.ensure_image(client, init))
    return BwrapSandbox(init)


async def bench(args: argparse.Namespace, state: Path, script: Path) -> None:
    """Measure and print every figure."""
    cores = os.cpu_count() or 1
    watch_children_with_pidfds()  # as the service does at start-up
    uids = claim_uids(cores, 63000, 1000)  # the bench's own range, claimed like a runner's
    service = RunnerService(build(args.backend, state), Slots(cores), state, uids=uids)

    await sandboxed_cases(service, 3)  # warm caches (page cache, init build)
    bare = statistics.median(await bare_python(N, script))
    per_case = statistics.median([await sandboxed_cases(service, N) for _ in range(3)])
    busy_20 = await throughput(service, N, args.seconds)
    busy_1 = await throughput(service, 1, args.seconds)
    once, per = await compile_once_vs_per_case(service)

    rows = [
        ("bare `python3` hello, per run", f"{bare * 1000:.1f} ms"),
        (f"sandboxed hello, per case ({N} cases a request)", f"{per_case * 1000:.1f} ms"),
        ("ratio sandboxed / bare (target ≤ 1.5×)", f"{per_case / bare:.2f}×"),
        (f"cases/s, {cores} slots busy, {N} cases a request (target ≥ 40/s)", f"{busy_20:.1f}"),
        (f"cases/s, {cores} slots busy, 1 case a request (compile step each)", f"{busy_1:.1f}"),
        (f"C: compile once + run {N}", f"{once:.2f} s"),
        (f"C: compile per case × {N}", f"{per:.2f} s"),
        ("C: compile-per-case / compile-once", f"{per / once:.1f}×"),
    ]
    load = os.getloadavg()[0]
    print(
        f"runner bench — backend {args.backend}, {cores} cores, python {Toolchain().python}, "
        f"load average {load:.2f} at the end (other work on the host slows every figure)"
    )
    print("| figure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--seconds", type=float, default=10.0, help="per throughput figure")
    args = parser.parse_args()
    state = Path("/var/lib/quiz-runner-bench")
    state.mkdir(parents=True, exist_ok=True)
    script = state / "hello.py"
    script.write_text(HELLO)
    asyncio.run(bench(args, state, script))


if __name__ == "__main__":
    main()
