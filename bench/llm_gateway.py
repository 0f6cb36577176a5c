"""Added latency of llm-gateway: a call over NATS through the gateway vs the same SDK call direct.

Run: `uv run python bench/llm_gateway.py [--requests 2000] [--database-url URL]`.

Both paths send the same structured-output request (one forced tool) to the testkit's Anthropic
stub, which runs in its own process. The gateway runs as a real process (SQLite WAL by default)
and does its whole job on each call: rate check and worst-case hold in one transaction, provider
call through the SDK, settle with the ledger row in a second transaction. Prints p50/p99 per
concurrency (1, 50, 200), the added latency and the ratio, in one run.
"""

from __future__ import annotations

import argparse
import asyncio
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
import nats

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_servicekit.natsio import request
from quiz_testkit.nats_server import NatsServer, free_port

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}, "findings": {"type": "array"}},
    "required": ["verdict"],
}
PROMPT = "Review this multiple-choice question: 2 + 2 = ? Choices: 3, 4 (right), 5."
MODEL = "claude-sonnet-4-6"
MAX_TOKENS = 300
LEVELS = (1, 50, 200)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def run_level(call: Any, concurrency: int, total: int) -> list[float]:
    """`total` calls with `concurrency` in flight; returns each call's latency in ms."""
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for i in queue:
            started = time.perf_counter()
            await call(i)
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*[worker() for _ in range(concurrency)])
    return latencies


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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="calls per level (c ≥ 50)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-"))
    nats_server = NatsServer(work / "nats").start()
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    procs: list[subprocess.Popen[bytes]] = []
    stub_cmd = [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(stub_port)]
    procs.append(spawn(stub_cmd, None, work / "stub.log"))
    env = {
        **os.environ,
        "NATS_URL": nats_server.url,
        "DATABASE_URL": args.database_url or f"sqlite+aiosqlite:///{work / 'gateway.db'}",
        "ANTHROPIC_API_KEY": "bench-key",
        "ANTHROPIC_BASE_URL": stub_url,
        "LLM_DAILY_CAP_USD": "1000000",
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
    }
    procs.append(spawn([sys.executable, "-m", "quiz_llm_gateway.main"], env, work / "gateway.log"))
    results: dict[int, dict[str, float]] = {}
    try:
        await wait_http(f"{stub_url}/v1/messages")
        nc = await nats.connect(nats_server.url)
        await wait_gateway(nc)
        direct = anthropic.AsyncAnthropic(api_key="bench-key", base_url=stub_url, max_retries=0)
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
            # A distinct teacher per call: the rate check runs, and never refuses.
            req = CompleteRequest(
                purpose="review",
                user=f"bench-{uuid.uuid4().hex[:12]}",
                messages=[{"role": "user", "content": PROMPT}],
                output_schema={"name": "review", "json_schema": SCHEMA},
                max_output_tokens=MAX_TOKENS,
            )
            await request(nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=60)

        # Warm both paths (connections, SQLite pages, JIT-less caches) before measuring.
        await run_level(call_direct, 20, 200)
        await run_level(call_gateway, 20, 200)
        for concurrency in LEVELS:
            total = 300 if concurrency == 1 else args.requests
            d = await run_level(call_direct, concurrency, total)
            g = await run_level(call_gateway, concurrency, total)
            results[concurrency] = {
                "requests": total,
                "direct_p50": percentile(d, 0.50),
                "direct_p99": percentile(d, 0.99),
                "gateway_p50": percentile(g, 0.50),
                "gateway_p99": percentile(g, 0.99),
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
        nats_server.stop()

    print(f"llm-gateway added latency (ms), {os.cpu_count()} cores, stub and gateway as processes")
    print(
        f"{'conc':>4} {'n':>5} | {'direct p50':>10} {'p99':>7} | {'gateway p50':>11} {'p99':>7} |"
        f" {'added p50':>9} {'p99':>7} | {'ratio p50':>9} {'p99':>6}"
    )
    for c, r in results.items():
        print(
            f"{c:>4} {r['requests']:>5.0f} | {r['direct_p50']:>10.2f} {r['direct_p99']:>7.2f} |"
            f" {r['gateway_p50']:>11.2f} {r['gateway_p99']:>7.2f} |"
            f" {r['gateway_p50'] - r['direct_p50']:>9.2f}"
            f" {r['gateway_p99'] - r['direct_p99']:>7.2f} |"
            f" {r['gateway_p50'] / r['direct_p50']:>9.2f}"
            f" {r['gateway_p99'] / r['direct_p99']:>6.2f}"
        )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
