"""Added latency and CPU of llm-gateway: a call over NATS through the gateway vs the same SDK
call direct, in the same run.

Run: `uv run python bench/llm_gateway.py [--requests 2000] [--database-url URL]
[--model-ms 0 200]`.

Both paths send the same structured-output request (one forced tool) to the testkit's Anthropic
stub, which runs in its own process (one stub per simulated model latency, `--model-ms`). The
gateway runs as a real process (SQLite WAL by default) and does its whole job on each call: rate
check and worst-case hold in one transaction, provider call through the SDK, settle with the
ledger row in a second transaction. Per model latency and concurrency (1, 50, 200) it prints
p50/p99 of both paths, the added latency, the calls/s of both, and CPU per call: the gateway
process's CPU time over the level's calls, against the direct client's own CPU time (the SDK
call alone) over the same number of calls. "Saturation" is the best calls/s of a level whose
gateway p99 stayed under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anthropic
import httpx

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_servicekit.natsio import request
from quiz_testkit.nats_server import NatsServer, free_port, nats_connect

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}, "findings": {"type": "array"}},
    "required": ["verdict"],
}
PROMPT = "Review this multiple-choice question: 2 + 2 = ? Choices: 3, 4 (right), 5."
MODEL = "claude-sonnet-4-6"
MAX_TOKENS = 300
LEVELS = (1, 50, 200)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def run_level(call: Any, concurrency: int, total: int) -> tuple[list[float], float]:
    """`total` calls with `concurrency` in flight; each call's latency (ms), and wall seconds."""
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for i in queue:
            started = time.perf_counter()
            await call(i)
            latencies.append((time.perf_counter() - started) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(concurrency)])
    return latencies, time.perf_counter() - began


async def wait_http(url: str, timeout_s: float = 30) -> None:
    """Until `url` answers 2xx/4xx (the stub answers 405 to GET /v1/messages)."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            try:
                await client.get(url)
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise TimeoutError(url)


async def wait_gateway(nc: Any, timeout_s: float = 60) -> None:
    """Until llm.v1.availability answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            await nc.request(subjects.LLM_AVAILABILITY, b"{}", timeout=1)
            return
        except Exception:
            await asyncio.sleep(0.2)
    raise TimeoutError("gateway did not start")


def spawn(args: list[str], env: dict[str, str] | None, log: Path) -> subprocess.Popen[bytes]:
    """A child process whose output goes to `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def both_paths(direct: anthropic.AsyncAnthropic, nc: Any) -> tuple[Any, Any]:
    """The same structured-output call straight to the stub with the SDK, and through the
    gateway over NATS (a distinct teacher per call: the rate check runs, and never refuses)."""
    tool = {"name": "review", "description": "Return the review.", "input_schema": SCHEMA}

    async def call_direct(_: int) -> None:
        await direct.messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": PROMPT}],
            tools=[tool],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "review"},
        )

    async def call_gateway(_: int) -> None:
        req = CompleteRequest(
            purpose="review",
            user=f"bench-{uuid.uuid4().hex[:12]}",
            messages=[{"role": "user", "content": PROMPT}],
            output_schema={"name": "review", "json_schema": SCHEMA},
            max_output_tokens=MAX_TOKENS,
        )
        await request(nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=60)

    return call_direct, call_gateway


async def measure(
    args: argparse.Namespace, work: Path, nats_url: str, model_ms: float
) -> dict[int, dict[str, float]]:
    """One stub with `model_ms` of latency, one gateway on it; every level, both paths."""
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    procs: list[subprocess.Popen[bytes]] = []
    stub_cmd = [
        sys.executable,
        "-m",
        "quiz_testkit.anthropic_stub",
        "--port",
        str(stub_port),
        "--delay-ms",
        str(model_ms),
    ]
    procs.append(spawn(stub_cmd, None, work / f"stub-{model_ms:g}.log"))
    db = args.database_url or f"sqlite+aiosqlite:///{work / f'gateway-{model_ms:g}.db'}"
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "DATABASE_URL": db,
        "ANTHROPIC_API_KEY": "bench-key",
        "ANTHROPIC_BASE_URL": stub_url,
        "LLM_DAILY_CAP_USD": "1000000",
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
        "QUIZ_DATA_DIR": str(work / "data"),
    }
    gateway = spawn(
        [sys.executable, "-m", "quiz_llm_gateway.main"], env, work / f"gateway-{model_ms:g}.log"
    )
    procs.append(gateway)
    results: dict[int, dict[str, float]] = {}
    try:
        await wait_http(f"{stub_url}/v1/messages")
        nc = await nats_connect(nats_url)
        await wait_gateway(nc)
        direct = anthropic.AsyncAnthropic(api_key="bench-key", base_url=stub_url, max_retries=0)
        call_direct, call_gateway = both_paths(direct, nc)

        # Warm both paths (connections, SQLite pages, caches) before measuring.
        await run_level(call_direct, 20, 200)
        await run_level(call_gateway, 20, 200)
        for concurrency in LEVELS:
            total = 300 if concurrency == 1 else args.requests
            if model_ms and concurrency == 1:
                total = 50
            cpu = time.process_time()
            d, d_wall = await run_level(call_direct, concurrency, total)
            direct_cpu = time.process_time() - cpu
            cpu = process_cpu_s(gateway.pid)
            g, g_wall = await run_level(call_gateway, concurrency, total)
            gateway_cpu = process_cpu_s(gateway.pid) - cpu
            results[concurrency] = {
                "requests": total,
                "direct_p50": percentile(d, 0.50),
                "direct_p99": percentile(d, 0.99),
                "gateway_p50": percentile(g, 0.50),
                "gateway_p99": percentile(g, 0.99),
                "direct_calls_s": total / d_wall,
                "gateway_calls_s": total / g_wall,
                "direct_cpu_ms": direct_cpu / total * 1000,
                "gateway_cpu_ms": gateway_cpu / total * 1000,
                "direct_mean": statistics.fmean(d),
                "gateway_mean": statistics.fmean(g),
            }
        await direct.close()
        await nc.drain()
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
    return results


def report(model_ms: float, results: dict[int, dict[str, float]]) -> None:
    """The table of one model latency, and its saturation line."""
    print(f"\nmodel latency {model_ms:g} ms — latency ms, CPU ms per call, calls/s")
    print(
        f"{'conc':>4} {'n':>5} | {'direct p50':>10} {'p99':>7} | {'gateway p50':>11} {'p99':>7} |"
        f" {'added p50':>9} {'p99':>7} | {'cpu direct':>10} {'gateway':>7} |"
        f" {'calls/s direct':>14} {'gateway':>7}"
    )
    for c, r in results.items():
        print(
            f"{c:>4} {r['requests']:>5.0f} | {r['direct_p50']:>10.2f} {r['direct_p99']:>7.2f} |"
            f" {r['gateway_p50']:>11.2f} {r['gateway_p99']:>7.2f} |"
            f" {r['gateway_p50'] - r['direct_p50']:>9.2f}"
            f" {r['gateway_p99'] - r['direct_p99']:>7.2f} |"
            f" {r['direct_cpu_ms']:>10.2f} {r['gateway_cpu_ms']:>7.2f} |"
            f" {r['direct_calls_s']:>14.0f} {r['gateway_calls_s']:>7.0f}"
        )
    fit = [r for r in results.values() if r["gateway_p99"] < 1000]
    if fit:
        best = max(fit, key=lambda r: r["gateway_calls_s"])
        ratio = best["gateway_calls_s"] / best["direct_calls_s"]
        print(
            f"saturation (best level with gateway p99 < 1 s): gateway "
            f"{best['gateway_calls_s']:.0f} calls/s vs direct {best['direct_calls_s']:.0f} "
            f"calls/s at the same level; ratio {ratio:.2f}"
        )
    else:
        print("saturation: no level kept the gateway's p99 under 1 s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="calls per level (c ≥ 50)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument(
        "--model-ms", type=float, nargs="+", default=[0.0, 200.0], help="simulated model latency"
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument(
        "--databases",
        action="store_true",
        help=(
            "issue 24: SQLite vs PostgreSQL, slices of the cap off (before) vs on (after), and "
            "one vs two gateway replicas on PostgreSQL, in interleaved rounds"
        ),
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --databases")
    parser.add_argument(
        "--before-src",
        default=None,
        help=(
            "with --databases: the gateway's src directory of the code before (e.g. from "
            "`git archive <commit> services/llm-gateway/src`), run for the 'before' variants "
            "instead of this code with slices off"
        ),
    )
    args = parser.parse_args()
    if args.databases:
        await databases_main(args)
        return

    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-"))
    nats_server = NatsServer(work / "nats").start()
    all_results: dict[float, dict[int, dict[str, float]]] = {}
    try:
        for model_ms in args.model_ms:
            all_results[model_ms] = await measure(args, work, nats_server.url, model_ms)
    finally:
        nats_server.stop()
    print(f"llm-gateway vs direct SDK, {os.cpu_count()} cores, stub and gateway as processes")
    for model_ms, results in all_results.items():
        report(model_ms, results)
    if args.json:
        print(json.dumps({str(k): v for k, v in all_results.items()}, indent=2))


# -- issue 24: the database figures (SQLite vs PostgreSQL, slices off/on, replicas) -------------

DB_LEVELS = (1, 50, 200)


async def measure_database(
    work: Path,
    nats_url: str,
    stub_url: str,
    database_url: str,
    *,
    slices: bool,
    replicas: int,
    requests: int,
    tag: str,
    source: str | None = None,
) -> dict[int, dict[str, float]]:
    """`replicas` gateway processes on `database_url` (slices of the cap on or off): per level,
    the direct SDK's and the gateway's p50/p99 and calls/s, as `measure` prints them."""
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "DATABASE_URL": database_url,
        "ANTHROPIC_API_KEY": "bench-key",
        "ANTHROPIC_BASE_URL": stub_url,
        "LLM_DAILY_CAP_USD": "1000000",
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
        "QUIZ_DATA_DIR": str(work / f"data-{tag}"),
        "LLM_GATEWAY_CAP_SLICE_CALLS": "16" if slices else "0",
    }
    if source is not None:  # another version of the gateway's package, ahead on the path
        env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")]).rstrip(":")
    procs = [
        spawn([sys.executable, "-m", "quiz_llm_gateway.main"], env, work / f"gw-{tag}-{i}.log")
        for i in range(replicas)
    ]
    results: dict[int, dict[str, float]] = {}
    try:
        nc = await nats_connect(nats_url)
        await wait_gateway(nc)
        await asyncio.sleep(1.0 if replicas > 1 else 0)  # the second one registered too
        direct = anthropic.AsyncAnthropic(api_key="bench-key", base_url=stub_url, max_retries=0)
        call_direct, call_gateway = both_paths(direct, nc)

        await run_level(call_direct, 20, 200)
        await run_level(call_gateway, 20, 300)
        for concurrency in DB_LEVELS:
            total = 300 if concurrency == 1 else requests
            d, d_wall = await run_level(call_direct, concurrency, total)
            g, g_wall = await run_level(call_gateway, concurrency, total)
            results[concurrency] = {
                "requests": total,
                "direct_p50": percentile(d, 0.50),
                "direct_p99": percentile(d, 0.99),
                "gateway_p50": percentile(g, 0.50),
                "gateway_p99": percentile(g, 0.99),
                "direct_calls_s": total / d_wall,
                "gateway_calls_s": total / g_wall,
            }
        await direct.close()
        await nc.drain()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
    return results


def saturation(results: dict[int, dict[str, float]]) -> float:
    """The best gateway calls/s of a level whose p99 stayed under 1 s (0: none did)."""
    fit = [r["gateway_calls_s"] for r in results.values() if r["gateway_p99"] < 1000]
    return max(fit, default=0.0)


def added_p50(results: dict[int, dict[str, float]]) -> float:
    """Gateway p50 minus the direct SDK's at c=1, ms."""
    r = results[1]
    return r["gateway_p50"] - r["direct_p50"]


async def databases_main(args: argparse.Namespace) -> None:
    """Rounds of every variant, interleaved (the host's load drifts); the ratios inside each
    round: PostgreSQL ÷ SQLite, slices on ÷ off, two replicas ÷ one."""
    from quiz_testkit.databases import postgres_available, postgres_database

    if not postgres_available():
        raise SystemExit("PostgreSQL does not answer on 127.0.0.1:5432")
    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-db-"))
    nats_server = NatsServer(work / "nats").start()
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    stub = spawn(
        [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(stub_port)],
        None,
        work / "stub.log",
    )
    variants = [
        ("sqlite", False, 1),
        ("postgresql", False, 1),
        ("sqlite", True, 1),
        ("postgresql", True, 1),
        ("postgresql", True, 2),
    ]
    rounds: list[dict[tuple[str, bool, int], dict[int, dict[str, float]]]] = []
    try:
        await wait_http(f"{stub_url}/v1/messages")
        for n in range(args.rounds):
            figures: dict[tuple[str, bool, int], dict[int, dict[str, float]]] = {}
            for db, slices, replicas in variants:
                tag = f"{n}-{db}-{'slices' if slices else 'percall'}-{replicas}"
                source = None if slices else args.before_src

                run = functools.partial(
                    measure_database, work, nats_server.url, stub_url, slices=slices,
                    source=source, replicas=replicas, requests=args.requests, tag=tag,
                )  # fmt: skip
                if db == "sqlite":
                    figures[(db, slices, replicas)] = await run(
                        f"sqlite+aiosqlite:///{work / f'{tag}.db'}"
                    )
                else:
                    with postgres_database("bench_llm_gw") as url:
                        figures[(db, slices, replicas)] = await run(url)
                r = figures[(db, slices, replicas)]
                before = "" if slices or not args.before_src else " (code before)"
                print(
                    f"round {n + 1} {db:<10} slices={'on ' if slices else 'off'} "
                    f"replicas={replicas}{before}: saturation {saturation(r):.0f} calls/s, "
                    f"added p50 c=1 {added_p50(r):+.2f} ms, levels "
                    + ", ".join(
                        f"c={c} {v['gateway_calls_s']:.0f}/s p99 {v['gateway_p99']:.0f} ms"
                        for c, v in r.items()
                    ),
                    flush=True,
                )
            rounds.append(figures)
    finally:
        stub.terminate()
        stub.wait(timeout=20)
        nats_server.stop()
    print(f"\nllm-gateway on SQLite vs PostgreSQL, {os.cpu_count()} cores; load {os.getloadavg()}")
    for n, f in enumerate(rounds):
        for slices in (False, True):
            sq, pg = f[("sqlite", slices, 1)], f[("postgresql", slices, 1)]
            print(
                f"round {n + 1} slices {'on ' if slices else 'off'}: saturation PG÷SQLite "
                f"{saturation(pg) / max(saturation(sq), 1e-9):.2f} "
                f"({saturation(pg):.0f} vs {saturation(sq):.0f}); added p50 c=1 PG÷SQLite "
                f"{added_p50(pg) / max(added_p50(sq), 1e-9):.2f} "
                f"({added_p50(pg):+.2f} vs {added_p50(sq):+.2f} ms)"
            )
        one, two = f[("postgresql", True, 1)], f[("postgresql", True, 2)]
        print(
            f"round {n + 1} PostgreSQL, slices on: 2 replicas ÷ 1 saturation "
            f"{saturation(two) / max(saturation(one), 1e-9):.2f} "
            f"({saturation(two):.0f} vs {saturation(one):.0f} calls/s)"
        )
    if args.json:
        print(
            json.dumps([{"/".join(map(str, k)): v for k, v in f.items()} for f in rounds], indent=2)
        )


if __name__ == "__main__":
    asyncio.run(main())
