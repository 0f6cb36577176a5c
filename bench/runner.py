"""Runner bench: sandbox overhead, cases per second with every slot busy, compile once vs per case.

Bare and sandboxed runs are interleaved (rounds alternate, ABBA), and each ratio is taken
inside a round: the host's other work moves both figures of a ratio alike.

Run as root from the repo root: `uv run python bench/runner.py [--backend bwrap|docker]`.
Prints a Markdown table of the figures (copied into docs/runner.md, "Performance").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
    """Seconds per `python3 -B -E -s main.py`, outside any sandbox.

    In a session of its own, as every sandbox is: with the kernel's autogroups (on here) each
    session is a scheduling group of its own, and a bare run left in the bench's session would
    share its CPU with the bench and get less of a loaded host than a sandbox does.
    """
    python = Toolchain().python
    out = []
    for _ in range(times):
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            python,
            "-B",
            "-E",
            "-s",
            str(script),
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
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


def cpu_s() -> float:
    """CPU seconds of this process and of its reaped descendants (each sandbox's processes are
    reaped up the chain: program, step init, pid 1, bwrap, us)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def interleaved(service: RunnerService, script: Path, rounds: int) -> list[Round]:
    """`rounds` rounds, each a bare run of N hellos then a sandboxed request of N (ABBA order).

    The ratio is taken inside each round, so the host's other work (which moves by more than
    the sandbox costs) weighs on both figures of a ratio alike.
    """
    out = []

    async def bare() -> tuple[float, float]:
        before = cpu_s()
        wall = statistics.median(await bare_python(N, script))
        return wall, (cpu_s() - before) / N

    async def sandboxed() -> tuple[float, float]:
        before = cpu_s()
        wall = await sandboxed_cases(service, N)
        return wall, (cpu_s() - before) / N

    for i in range(rounds):
        if i % 2 == 0:
            b, s = await bare(), await sandboxed()
        else:
            s, b = await sandboxed(), await bare()
        out.append(Round(b[0], s[0], b[1], s[1]))
    return out


@dataclass(frozen=True)
class Round:
    """One round: seconds per bare run and per sandboxed case, wall clock and CPU."""

    bare: float
    sandboxed: float
    bare_cpu: float  # with the bench's own share of spawning and reading
    sandboxed_cpu: float  # with the runner's own share (the request's compile step included)

    @property
    def ratio(self) -> float:
        return self.sandboxed / self.bare

    @property
    def cpu_ratio(self) -> float:
        return self.sandboxed_cpu / self.bare_cpu


async def rate(step: Callable[[], Awaitable[int]], clients: int, seconds: float) -> float:
    """Units per second of `clients` loops running `step` (it returns the units it did) back to
    back for `seconds`."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            # Not `done += await step()`: that reads `done` before the await, and a client
            # finishing meanwhile would have its units overwritten (half the rate, with two).
            units = await step()
            done += units

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done / (time.perf_counter() - start)


async def throughput(service: RunnerService, cases_per_request: int, seconds: float) -> float:
    """Cases per second with one client per slot, each sending requests back to back."""

    async def request() -> int:
        return len((await service.run(hello_request(cases_per_request))).cases)

    return await rate(request, service.slots.total, seconds)


async def bare_throughput(script: Path, clients: int, seconds: float) -> float:
    """Bare `python3` hellos per second, one client per slot back to back: the floor."""

    async def hello() -> int:
        return len(await bare_python(1, script))

    return await rate(hello, clients, seconds)


def spread(values: list[float], fmt: str) -> str:
    """median [min–max]."""
    return (
        f"{format(statistics.median(values), fmt)} "
        f"[{format(min(values), fmt)}–{format(max(values), fmt)}]"
    )


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
        return docker_backend.DockerSandbox(
            client, docker_backend.ensure_image(client, init), state
        )
    return BwrapSandbox(init)


async def bench(args: argparse.Namespace, state: Path, script: Path) -> None:
    """Measure and print every figure."""
    cores = os.cpu_count() or 1
    watch_children_with_pidfds()  # as the service does at start-up
    uids = claim_uids(cores, 63000, 1000)  # the bench's own range, claimed like a runner's
    service = RunnerService(build(args.backend, state), Slots(cores), state, uids=list(uids))

    await sandboxed_cases(service, 3)  # warm caches (page cache, init build)
    rounds = await interleaved(service, script, args.rounds)
    # Throughput, interleaved too: bare, 20-case, 1-case, then the same again in reverse.
    third = args.seconds / 2
    figures: dict[str, list[float]] = {"bare": [], "busy_20": [], "busy_1": []}
    # CPU seconds per case (or bare run) while every slot is busy: cores / that is the rate an
    # idle host of this many cores would reach, whatever else runs here now.
    # (Not bare's: two interpreters at once on this VM's two vCPUs cost twice the CPU each.)
    cpu: dict[str, list[float]] = {"bare": [], "busy_20": [], "busy_1": []}
    for order in (("bare", "busy_20", "busy_1"), ("busy_1", "busy_20", "bare")):
        for name in order:
            before, start = cpu_s(), time.perf_counter()
            if name == "bare":
                rate = await bare_throughput(script, cores, third)
            else:
                per_request = N if name == "busy_20" else 1
                rate = await throughput(service, per_request, third)
            figures[name].append(rate)
            cpu[name].append((cpu_s() - before) / (rate * (time.perf_counter() - start)))
    bare_s, busy_20, busy_1 = (statistics.mean(figures[k]) for k in ("bare", "busy_20", "busy_1"))
    ceiling = {k: cores / statistics.mean(v) for k, v in cpu.items()}
    once, per = await compile_once_vs_per_case(service)

    rows = [
        (
            f"bare `python3` hello, per run (median of {N}, per round)",
            spread([r.bare * 1000 for r in rounds], ".1f") + " ms",
        ),
        (
            f"sandboxed hello, per case ({N} cases a request)",
            spread([r.sandboxed * 1000 for r in rounds], ".1f") + " ms",
        ),
        (
            f"ratio sandboxed / bare, per round, {len(rounds)} rounds (target ≤ 1.3×)",
            spread([r.ratio for r in rounds], ".2f") + "×",
        ),
        (
            "CPU per case / CPU per bare run, per round (runner and sandbox processes)",
            spread([r.cpu_ratio for r in rounds], ".2f") + "×",
        ),
        (f"bare `python3` hellos/s, {cores} at a time (the floor)", f"{bare_s:.1f}"),
        (f"cases/s, {cores} slots busy, {N} cases a request (target ≥ 120/s)", f"{busy_20:.1f}"),
        (f"cases/s, {cores} slots busy, 1 case a request (target ≥ 60/s)", f"{busy_1:.1f}"),
        (
            f"CPU per case (ms) → ceiling on {cores} idle cores (cases/s): "
            f"{N}-case requests, 1-case requests",
            ", ".join(
                f"{statistics.mean(cpu[k]) * 1000:.1f} → {ceiling[k]:.0f}"
                for k in ("busy_20", "busy_1")
            ),
        ),
        (f"C: compile once + run {N}", f"{once:.2f} s"),
        (f"C: compile per case × {N}", f"{per:.2f} s"),
        ("C: compile-per-case / compile-once", f"{per / once:.1f}×"),
    ]
    load = os.getloadavg()
    print(
        f"runner bench — backend {args.backend}, {cores} cores, python {Toolchain().python}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end "
        "(other work on the host slows every figure)"
    )
    print("| figure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    parser.add_argument("--seconds", type=float, default=10.0, help="per throughput figure")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args()
    state = Path("/var/lib/quiz-runner-bench")
    state.mkdir(parents=True, exist_ok=True)
    script = state / "hello.py"
    script.write_text(HELLO)
    asyncio.run(bench(args, state, script))


if __name__ == "__main__":
    main()
