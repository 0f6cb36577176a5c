"""Added latency and CPU of llm-gateway: a call over NATS through the gateway vs the same SDK
call direct, in the same run.

Run: `uv run python bench/llm_gateway.py [--requests 2000] [--database-url URL]
[--model-ms 0 200]`.

Both paths send the same structured-output request (one forced tool) to the testkit's Anthropic
stub, which runs in its own process (one stub per simulated model latency, `--model-ms`). The
gateway runs as a real process (SQLite WAL by default) and does its whole job on each call: rate
check and worst-case hold in one transaction, provider request, settle with the
ledger row in a second transaction. Per model latency and concurrency (1, 50, 200) it prints
p50/p99 of both paths, the added latency, the calls/s of both, and CPU per call: the gateway
process's CPU time over the level's calls, against the direct client's own CPU time (the SDK
call alone) over the same number of calls. "Saturation" is the best calls/s of a level whose
gateway p99 stayed under 1 s.

Peers in the same run, each measured right after the gateway at every level:
- Portkey's gateway (`@portkey-ai/gateway`, Node), when node and npm are on the machine: installed
  on demand with `npm install --prefix .data/bench/portkey` (git-ignored), run as its own process
  and pointed at the same stub (`x-portkey-custom-host`); the same SDK request goes through it.
  Its CPU per call comes from /proc/<pid>/stat like the gateway's, and the bench prints
  gateway ÷ Portkey for CPU per call and p50 at each level. `--no-portkey` skips it; a missing
  node/npm or a failed install skips it with the reason printed.
- `--baseline-python PATH` (e.g. another checkout's `.venv/bin/python`): a second gateway from
  that interpreter's code, on its own NATS server and SQLite file, and the ratio this code ÷ it.
`--databases` (issue 24, 32): SQLite vs PostgreSQL in interleaved rounds, per-call admission and
slices of the cap, one and two replicas (`--slices-only`: the default configuration on both
databases alone); at c=1 the direct and the gateway calls alternate one by one, so that the
added latency is measured at the same moment of the host's load.
`--side-by-side N [--before-tree DIR]` (issue 32): c=1 only, N turns of one call each through the
direct SDK, a gateway on SQLite and one on PostgreSQL (and the same two from another checkout's
tree, e.g. `git archive <commit> | tar -x -C DIR`), all running at once: the ratio PG ÷ SQLite
of the added p50 without the drift between variants run a minute apart.
`--repeat N` makes N whole runs (fresh processes each) and prints the median and range of each
ratio across them: on a shared host one run's ratio moves with the load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
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
PORTKEY_PACKAGE = "@portkey-ai/gateway"
PORTKEY_PREFIX = Path(__file__).resolve().parent.parent / ".data" / "bench" / "portkey"
PORTKEY_SCRIPT = Path("node_modules/@portkey-ai/gateway/build/start-server.js")


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


def sdk_caller(client: anthropic.AsyncAnthropic, tool: dict[str, Any]) -> Any:
    """One structured-output SDK call per invocation, through `client`'s base URL."""

    async def call(_: int) -> None:
        await client.messages.create(  # type: ignore[call-overload]
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": PROMPT}],
            tools=[tool],
            tool_choice={"type": "tool", "name": "review"},
        )

    return call


def gateway_caller(nc: Any) -> Any:
    """One llm.v1.complete request per invocation over `nc`."""

    async def call(_: int) -> None:
        # A distinct teacher per call: the rate check runs, and never refuses.
        req = CompleteRequest(
            purpose="review",
            user=f"bench-{uuid.uuid4().hex[:12]}",
            messages=[{"role": "user", "content": PROMPT}],
            output_schema={"name": "review", "json_schema": SCHEMA},
            max_output_tokens=MAX_TOKENS,
        )
        await request(nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=60)

    return call


def both_paths(direct: anthropic.AsyncAnthropic, nc: Any) -> tuple[Any, Any]:
    """The same structured-output call straight to the stub with the SDK, and through the
    gateway over NATS (a distinct teacher per call: the rate check runs, and never refuses)."""
    tool = {"name": "review", "description": "Return the review.", "input_schema": SCHEMA}
    return sdk_caller(direct, tool), gateway_caller(nc)


def install_portkey(prefix: Path = PORTKEY_PREFIX) -> Path | str:
    """Portkey's start script, installed with npm on first use; a reason string when it cannot be.

    Installed under `prefix` (git-ignored `.data/bench/portkey`), never into the repository's
    dependencies: it is a peer to compare against, not something the project runs.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "node or npm is not on PATH"
    script = prefix / PORTKEY_SCRIPT
    if not script.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    PORTKEY_PACKAGE,
                ],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (OSError, subprocess.SubprocessError) as e:
            return f"npm install {PORTKEY_PACKAGE} failed: {type(e).__name__}: {e}"[:300]
    if not script.exists():
        return f"npm installed no {PORTKEY_SCRIPT}"
    return script


async def start_portkey(
    script: Path, work: Path, stub_url: str, model_ms: float
) -> tuple[subprocess.Popen[bytes], anthropic.AsyncAnthropic]:
    """Portkey's gateway as a process, and an SDK client that calls the stub through it."""
    port = free_port()
    node = shutil.which("node") or "node"
    proc = spawn(
        [node, str(script), f"--port={port}", "--headless"],
        None,
        work / f"portkey-{model_ms:g}.log",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_http(url)
    except TimeoutError:
        proc.terminate()
        raise
    client = anthropic.AsyncAnthropic(
        api_key="bench-key",
        base_url=url,
        max_retries=0,
        # Portkey's Anthropic provider, sent to the stub instead of api.anthropic.com.
        default_headers={
            "x-portkey-provider": "anthropic",
            "x-portkey-custom-host": f"{stub_url}/v1",
        },
    )
    return proc, client


def start_baseline(
    python: str, work: Path, nats_url: str, stub_url: str, model_ms: float
) -> subprocess.Popen[bytes]:
    """A second gateway from another checkout's interpreter, on its own NATS and SQLite file."""
    env = gateway_env(
        nats_url, f"sqlite+aiosqlite:///{work / f'baseline-{model_ms:g}.db'}", stub_url
    )
    env["QUIZ_DATA_DIR"] = str(work / "baseline-data")
    return spawn([python, "-m", "quiz_llm_gateway.main"], env, work / f"baseline-{model_ms:g}.log")


async def measure_peer(
    name: str, call: Any, pid: int, concurrency: int, total: int, into: dict[str, float]
) -> None:
    """One level through a peer: its p50/p99, calls/s and CPU per call (of process `pid`),
    added to `into` as `{name}_p50`, `{name}_p99`, `{name}_calls_s`, `{name}_cpu_ms`."""
    cpu = process_cpu_s(pid)
    latencies, wall = await run_level(call, concurrency, total)
    used = process_cpu_s(pid) - cpu
    into[f"{name}_p50"] = percentile(latencies, 0.50)
    into[f"{name}_p99"] = percentile(latencies, 0.99)
    into[f"{name}_calls_s"] = total / wall
    into[f"{name}_cpu_ms"] = used / total * 1000


def gateway_env(nats_url: str, db: str, stub_url: str) -> dict[str, str]:
    """The environment of a gateway process under bench."""
    return {
        **os.environ,
        "NATS_URL": nats_url,
        "DATABASE_URL": db,
        "ANTHROPIC_API_KEY": "bench-key",
        "ANTHROPIC_BASE_URL": stub_url,
        "LLM_DAILY_CAP_USD": "1000000",
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
    }


def level_figures(
    total: int, direct: list[float], direct_wall: float, gateway: list[float], gateway_wall: float
) -> dict[str, float]:
    """One level's latencies (ms) and calls/s of both paths, from their samples and wall time."""
    return {
        "requests": total,
        "direct_p50": percentile(direct, 0.50),
        "direct_p99": percentile(direct, 0.99),
        "gateway_p50": percentile(gateway, 0.50),
        "gateway_p99": percentile(gateway, 0.99),
        "direct_calls_s": total / direct_wall,
        "gateway_calls_s": total / gateway_wall,
    }


async def measure(
    args: argparse.Namespace,
    work: Path,
    nats_url: str,
    model_ms: float,
    portkey: Path | None = None,
    baseline_nats_url: str | None = None,
) -> dict[int, dict[str, float]]:
    """One stub with `model_ms` of latency, one gateway on it; every level, both paths (and the
    peers: Portkey from `portkey`'s script, a baseline gateway on `baseline_nats_url`)."""
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
    env = gateway_env(nats_url, db, stub_url)
    env["QUIZ_DATA_DIR"] = str(work / "data")
    gateway = spawn(
        [sys.executable, "-m", "quiz_llm_gateway.main"], env, work / f"gateway-{model_ms:g}.log"
    )
    procs.append(gateway)
    baseline = None
    if baseline_nats_url is not None:
        baseline = start_baseline(args.baseline_python, work, baseline_nats_url, stub_url, model_ms)
        procs.append(baseline)
    peer_calls: dict[str, tuple[Any, int]] = {}
    peer_clients: list[anthropic.AsyncAnthropic] = []
    peer_ncs: list[Any] = []
    results: dict[int, dict[str, float]] = {}
    try:
        await wait_http(f"{stub_url}/v1/messages")
        nc = await nats_connect(nats_url)
        await wait_gateway(nc)
        direct = anthropic.AsyncAnthropic(api_key="bench-key", base_url=stub_url, max_retries=0)
        tool = {"name": "review", "description": "Return the review.", "input_schema": SCHEMA}

        call_direct = sdk_caller(direct, tool)
        call_gateway = gateway_caller(nc)

        if baseline is not None and baseline_nats_url is not None:
            bnc = await nats_connect(baseline_nats_url)
            peer_ncs.append(bnc)
            await wait_gateway(bnc)
            peer_calls["baseline"] = (gateway_caller(bnc), baseline.pid)
        if portkey is not None:
            pk_proc, pk_client = await start_portkey(portkey, work, stub_url, model_ms)
            procs.append(pk_proc)
            peer_clients.append(pk_client)
            peer_calls["portkey"] = (sdk_caller(pk_client, tool), pk_proc.pid)

        # Warm every path (connections, SQLite pages, caches, V8's JIT) before measuring.
        await run_level(call_direct, 20, 200)
        await run_level(call_gateway, 20, 200)
        for peer_call, _ in peer_calls.values():
            await run_level(peer_call, 20, 200)
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
                **level_figures(total, d, d_wall, g, g_wall),
                "direct_cpu_ms": direct_cpu / total * 1000,
                "gateway_cpu_ms": gateway_cpu / total * 1000,
                "direct_mean": statistics.fmean(d),
                "gateway_mean": statistics.fmean(g),
            }
            for name, (peer_call, pid) in peer_calls.items():
                await measure_peer(name, peer_call, pid, concurrency, total, results[concurrency])
        await direct.close()
        for client in peer_clients:
            await client.close()
        for peer_nc in peer_ncs:
            await peer_nc.drain()
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


def report_peers(results: dict[int, dict[str, float]]) -> None:
    """Per level, the gateway against each peer measured in the same run: CPU per call, p50,
    added p50 over the direct SDK call, and the ratios gateway ÷ peer."""
    for name in ("portkey", "baseline"):
        if not any(f"{name}_p50" in r for r in results.values()):
            continue
        label = "Portkey" if name == "portkey" else "baseline gateway"
        print(f"gateway vs {label} (same run): CPU ms per call, p50 and added p50 ms")
        print(
            f"{'conc':>4} | {'cpu gateway':>11} {name:>9} {'ratio':>6} |"
            f" {'p50 gateway':>11} {name:>9} {'ratio':>6} | {'added gateway':>13} {name:>9}"
        )
        for c, r in results.items():
            if f"{name}_p50" not in r:
                continue
            cpu_ratio = r["gateway_cpu_ms"] / r[f"{name}_cpu_ms"] if r[f"{name}_cpu_ms"] else 0
            p50_ratio = r["gateway_p50"] / r[f"{name}_p50"]
            print(
                f"{c:>4} | {r['gateway_cpu_ms']:>11.2f} {r[f'{name}_cpu_ms']:>9.2f}"
                f" {cpu_ratio:>6.2f} | {r['gateway_p50']:>11.2f} {r[f'{name}_p50']:>9.2f}"
                f" {p50_ratio:>6.2f} | {r['gateway_p50'] - r['direct_p50']:>13.2f}"
                f" {r[f'{name}_p50'] - r['direct_p50']:>9.2f}"
            )


def report_spread(runs: list[dict[float, dict[int, dict[str, float]]]]) -> None:
    """Across repeated runs: the median [min–max] of gateway ÷ peer CPU per call and of the
    added p50 (gateway and peers over the direct call), per model latency and level."""

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"

    print(f"\nacross {len(runs)} runs: median [min–max]")
    for model_ms in runs[0]:
        for c in runs[0][model_ms]:
            rows = [r[model_ms][c] for r in runs]
            added = [r["gateway_p50"] - r["direct_p50"] for r in rows]
            line = f"model {model_ms:g} ms c={c}: gateway added p50 {spread(added)} ms"
            for name in ("portkey", "baseline"):
                if all(f"{name}_cpu_ms" in r and r[f"{name}_cpu_ms"] for r in rows):
                    cpu = [r["gateway_cpu_ms"] / r[f"{name}_cpu_ms"] for r in rows]
                    peer_added = [r[f"{name}_p50"] - r["direct_p50"] for r in rows]
                    line += (
                        f"; CPU/call gateway ÷ {name} {spread(cpu)},"
                        f" {name} added p50 {spread(peer_added)} ms"
                    )
            print(line)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="calls per level (c ≥ 50)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument(
        "--model-ms", type=float, nargs="+", default=[0.0, 200.0], help="simulated model latency"
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--no-portkey", action="store_true", help="skip the Portkey peer")
    parser.add_argument(
        "--repeat", type=int, default=1, help="whole runs (fresh processes), then the spread"
    )
    parser.add_argument(
        "--baseline-python",
        default=None,
        help="another checkout's python: its gateway is measured too, in the same run",
    )
    parser.add_argument(
        "--databases",
        action="store_true",
        help=(
            "SQLite vs PostgreSQL (saturation, and the added latency at concurrency 1), slices "
            "of the cap off vs on, and one vs two gateway replicas on PostgreSQL, in "
            "interleaved rounds"
        ),
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --databases")
    parser.add_argument(
        "--side-by-side",
        type=int,
        default=0,
        metavar="N",
        help=(
            "the added latency at concurrency 1, PostgreSQL vs SQLite: N turns of one call each "
            "through the direct SDK, a gateway on SQLite and one on PostgreSQL (and the "
            "--before-tree code's two), so every path sees the same moments of the host's load"
        ),
    )
    parser.add_argument(
        "--before-tree",
        default=None,
        help="with --side-by-side: a checkout (e.g. `git archive <commit>`) whose code runs too",
    )
    parser.add_argument(
        "--slices-only",
        action="store_true",
        help="with --databases: only SQLite and PostgreSQL with slices on (the default)",
    )
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
    if args.side_by_side:
        await side_by_side_main(args)
        return
    if args.databases:
        await databases_main(args)
        return

    portkey: Path | None = None
    if not args.no_portkey:
        found = install_portkey()
        if isinstance(found, str):
            print(f"Portkey peer skipped: {found}")
        else:
            portkey = found
    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-"))
    nats_server = NatsServer(work / "nats").start()
    baseline_nats = NatsServer(work / "nats-baseline").start() if args.baseline_python else None
    runs: list[dict[float, dict[int, dict[str, float]]]] = []
    try:
        for run in range(args.repeat):
            run_dir = work / f"run-{run + 1}"
            run_dir.mkdir()
            all_results: dict[float, dict[int, dict[str, float]]] = {}
            for model_ms in args.model_ms:
                all_results[model_ms] = await measure(
                    args,
                    run_dir,
                    nats_server.url,
                    model_ms,
                    portkey,
                    baseline_nats.url if baseline_nats is not None else None,
                )
            runs.append(all_results)
    finally:
        nats_server.stop()
        if baseline_nats is not None:
            baseline_nats.stop()
    print(f"llm-gateway vs direct SDK, {os.cpu_count()} cores, stub and gateway as processes")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for run, all_results in enumerate(runs, 1):
        if len(runs) > 1:
            print(f"\n=== run {run} of {len(runs)}")
        for model_ms, results in all_results.items():
            report(model_ms, results)
            report_peers(results)
    if len(runs) > 1:
        report_spread(runs)
    if args.json:
        print(json.dumps([{str(k): v for k, v in r.items()} for r in runs], indent=2))


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
            if concurrency == 1:
                # Issue 32: one direct call, then one through the gateway, in turn: both paths
                # see the same moment of a shared host's load, so their difference (the added
                # latency) does not move with it as much as two runs one after the other.
                d, d_wall, g, g_wall = await run_alternating(call_direct, call_gateway, total)
            else:
                d, d_wall = await run_level(call_direct, concurrency, total)
                g, g_wall = await run_level(call_gateway, concurrency, total)
            results[concurrency] = level_figures(total, d, d_wall, g, g_wall)
        await direct.close()
        await nc.drain()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
    return results


async def run_alternating(
    first: Any, second: Any, total: int
) -> tuple[list[float], float, list[float], float]:
    """`total` calls of each, one at a time, alternating: each one's latencies (ms) and the wall
    seconds its own calls took."""
    a: list[float] = []
    b: list[float] = []
    for i in range(total):
        for call, into in ((first, a), (second, b)):
            started = time.perf_counter()
            await call(i)
            into.append((time.perf_counter() - started) * 1000)
    return a, sum(a) / 1000, b, sum(b) / 1000


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
    if args.slices_only:  # issue 32: the default configuration alone, SQLite vs PostgreSQL
        variants = [("sqlite", True, 1), ("postgresql", True, 1)]
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
            if ("sqlite", slices, 1) not in f or ("postgresql", slices, 1) not in f:
                continue
            sq, pg = f[("sqlite", slices, 1)], f[("postgresql", slices, 1)]
            print(
                f"round {n + 1} slices {'on ' if slices else 'off'}: saturation PG÷SQLite "
                f"{saturation(pg) / max(saturation(sq), 1e-9):.2f} "
                f"({saturation(pg):.0f} vs {saturation(sq):.0f}); added p50 c=1 PG÷SQLite "
                f"{added_p50(pg) / max(added_p50(sq), 1e-9):.2f} "
                f"({added_p50(pg):+.2f} vs {added_p50(sq):+.2f} ms)"
            )
        if ("postgresql", True, 2) not in f:
            continue
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


def tree_path(tree: str) -> str:
    """PYTHONPATH for the gateway and the libs of another checkout at `tree`."""
    root = Path(tree).resolve()
    srcs = [root / "services" / "llm-gateway" / "src"]
    srcs += sorted((root / "libs").glob("*/src"))
    return os.pathsep.join(str(p) for p in srcs)


async def side_by_side_main(args: argparse.Namespace) -> None:
    """c=1, one call at a time in turn through the direct SDK and each gateway (SQLite and
    PostgreSQL; the `--before-tree` code's too): every path sees the same moments of the host's
    load, so the added latencies and their ratio PG ÷ SQLite move less than between variants
    run one after another. Each gateway has its own NATS server and database, slices on."""
    from quiz_testkit.databases import postgres_available, postgres_database

    if not postgres_available():
        raise SystemExit("PostgreSQL does not answer on 127.0.0.1:5432")
    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-sbs-"))
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    stub_cmd = [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(stub_port)]
    procs = [spawn(stub_cmd, None, work / "stub.log")]
    servers: list[NatsServer] = []
    ncs: list[Any] = []
    trees: list[tuple[str, str | None]] = [("", None)]
    if args.before_tree:
        trees.append((" before", tree_path(args.before_tree)))
    with contextlib.ExitStack() as stack:
        try:
            await wait_http(f"{stub_url}/v1/messages")
            direct = anthropic.AsyncAnthropic(api_key="bench-key", base_url=stub_url, max_retries=0)
            tool = {"name": "review", "description": "Return the review.", "input_schema": SCHEMA}
            call_direct = sdk_caller(direct, tool)
            paths: list[tuple[str, Any]] = [("direct", call_direct)]
            for suffix, path in trees:
                for db in ("sqlite", "postgresql"):
                    name = f"{db}{suffix}"
                    url = (
                        f"sqlite+aiosqlite:///{work / f'{len(paths)}.db'}"
                        if db == "sqlite"
                        else stack.enter_context(postgres_database("bench_llm_gw_sbs"))
                    )
                    server = NatsServer(work / f"nats-{len(paths)}").start()
                    servers.append(server)
                    env = gateway_env(server.url, url, stub_url)
                    env["QUIZ_DATA_DIR"] = str(work / f"data-{len(paths)}")
                    env["LLM_GATEWAY_CAP_SLICE_CALLS"] = "16"
                    if path is not None:
                        env["PYTHONPATH"] = path
                    log = work / f"gw-{len(paths)}.log"
                    procs.append(spawn([sys.executable, "-m", "quiz_llm_gateway.main"], env, log))
                    nc = await nats_connect(server.url)
                    ncs.append(nc)
                    await wait_gateway(nc)
                    paths.append((name, gateway_caller(nc)))
            for _, call in paths:
                await run_level(call, 10, 200)
            samples: dict[str, list[float]] = {name: [] for name, _ in paths}
            for i in range(args.side_by_side):
                for name, call in paths:
                    started = time.perf_counter()
                    await call(i)
                    samples[name].append((time.perf_counter() - started) * 1000)
            await direct.close()
        finally:
            for nc in ncs:
                await nc.close()
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=20)
            for server in servers:
                server.stop()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nside by side, c=1, {args.side_by_side} turns; load average {load} (1, 5, 15 min)")
    base = percentile(samples["direct"], 0.5)
    added = {n: percentile(v, 0.5) - base for n, v in samples.items()}
    for name, values in samples.items():
        print(
            f"{name:<18} p50 {percentile(values, 0.5):7.2f} ms  p99 {percentile(values, 0.99):7.2f}"
            f" ms  added p50 {added[name]:+6.2f} ms"
        )
    for suffix, _ in trees:
        sq, pg = added[f"sqlite{suffix}"], added[f"postgresql{suffix}"]
        label = suffix.strip() or ("this code" if len(trees) > 1 else "result")
        print(
            f"{label}: added p50 c=1 PG÷SQLite {pg / max(sq, 1e-9):.2f} ({pg:+.2f} vs {sq:+.2f} ms)"
        )


if __name__ == "__main__":
    asyncio.run(main())
