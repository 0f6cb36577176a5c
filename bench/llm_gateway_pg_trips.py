"""Where PostgreSQL's time goes per llm-gateway call: the server's own account, statement by
statement, of calls through a real gateway process.

Run: `uv run python bench/llm_gateway_pg_trips.py [--calls 200] [--concurrency 1] [--slices 16]
[--py-spy PATH]`.

A fresh PostgreSQL database with `log_min_duration_statement = 0` set on it alone (ALTER
DATABASE: no other database on the shared server logs more), one gateway process on it, the
testkit's Anthropic stub, and `--calls` llm.v1.complete requests (`--concurrency` in flight; a
fresh teacher each, as bench/llm_gateway.py sends them) after a warm-up. The server log's lines
of that database are then read back and printed per call: every message the server ran (simple
`statement:` lines — BEGIN, COMMIT, the pool's ping `;` — and the extended protocol's parse /
bind / execute), how many were parsed (a statement parsed again is one the driver did not
prepare), and the server-side milliseconds of each kind. Without a pipeline each statement is a
round trip; a pipeline (servicekit's `Database.pipeline`) sends a transaction's statements in one.

The log times a COMMIT statement, WAL flush included; the commit of a single statement sent
alone (autocommit, no COMMIT statement) happens after its logged execute, so its flush is not
in these figures — it is still paid (synchronous_commit stays on for a settle).
`--py-spy PATH` (a py-spy binary) also samples the gateway process's threads during the calls
and prints the share of samples by what they were doing.

Needs PostgreSQL on 127.0.0.1:5432 (trust auth, the tests' server) as superuser for ALTER
DATABASE and a readable server log (`--log`, default Debian's); prints why when it cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_gateway import gateway_caller, gateway_env, run_level, spawn, wait_gateway, wait_http

from quiz_testkit.databases import (
    PG_HOST,
    PG_PORT,
    PG_USER,
    postgres_available,
    postgres_database,
)
from quiz_testkit.nats_server import NatsServer, free_port, nats_connect

DEFAULT_LOG = Path("/var/log/postgresql/postgresql-15-main.log")
_LINE = re.compile(r"duration: ([0-9.]+) ms\s+(statement|parse|bind|execute)[^:]*: (.*)")


def kind_of(sql: str) -> str:
    """A short name for a statement: its verb and table, enough to tell the gateway's apart."""
    s = " ".join(sql.split())
    upper = s.upper()
    for word in ("BEGIN", "COMMIT", "ROLLBACK"):
        if upper.startswith(word):
            return word
    if upper.startswith("SELECT 1") or upper == "SELECT 1":
        return "ping (SELECT 1)"
    if "PG_ADVISORY_XACT_LOCK" in upper:
        return "rate lock" + (" + async commit" if "SET_CONFIG" in upper else "")
    if "SET_CONFIG" in upper:
        return "set synchronous_commit"
    m = re.match(r"(WITH|INSERT INTO|UPDATE|DELETE FROM|SELECT .*? FROM)\s+(\w+)", s, re.I)
    if m:
        return f"{m.group(1).split()[0].upper()} {m.group(2)}"
    return s[:40]


def account(lines: list[str], calls: int) -> None:
    """Print the per-call account of the server log's `lines` (one database's)."""
    count: collections.Counter[tuple[str, str]] = collections.Counter()
    ms: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in lines:
        m = _LINE.search(line)
        if m is None:
            continue
        duration, phase, sql = float(m.group(1)), m.group(2), m.group(3)
        key = (kind_of(sql), phase)
        count[key] += 1
        ms[key] += duration
    kinds = sorted({k for k, _ in count}, key=lambda k: -sum(count[(k, p)] for p in _PHASES))
    print(f"{'statement':<34} {'runs/call':>9} {'parsed/call':>11} {'server ms/call':>14}")
    trips = 0.0
    server = 0.0
    for k in kinds:
        runs = (count[(k, "statement")] + count[(k, "execute")]) / calls
        parsed = count[(k, "parse")] / calls
        total = sum(ms[(k, p)] for p in _PHASES) / calls
        trips += runs
        server += total
        print(f"{k:<34} {runs:>9.2f} {parsed:>11.2f} {total:>14.3f}")
    print(f"{'all (≈ round trips without pipeline)':<34} {trips:>9.2f} {'':>11} {server:>14.3f}")


_PHASES = ("statement", "parse", "bind", "execute")

# What a sample of the gateway's process is doing, by the first of these its stack contains
# (py-spy's raw stacks: frames `function (file:line)` joined by `;`, then a count).
SPY_GROUPS = (
    ("psycopg: waiting for the server", ("wait_c", "wait_poll", "wait_epoll", "wait_select")),
    ("psycopg pipeline on the loop (Python side)", ("pg_pipeline.py",)),
    ("psycopg execute (Python side)", ("psycopg/cursor.py", "psycopg/_cursor_base.py")),
    ("sqlalchemy pool checkout/checkin", ("sqlalchemy/pool",)),
    ("sqlalchemy execute", ("sqlalchemy/engine",)),
    ("rows (gateway SQL glue)", ("quiz_llm_gateway/rows/",)),
    ("db worker thread idle", ("concurrent/futures/thread.py",)),
    ("anthropic SDK / httpx", ("anthropic/", "httpx", "httpcore")),
    ("nats", ("nats/",)),
    ("asyncio loop idle (select)", ("selectors.py",)),
)


def spied(path: Path) -> None:
    """Print the share of the gateway process's samples per group of SPY_GROUPS."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        print(f"no py-spy profile ({e})")
        return
    totals: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in lines:
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        samples += int(n)
        group = next((g for g, marks in SPY_GROUPS if any(m in stack for m in marks)), "other")
        totals[group] += int(n)
    print(f"py-spy, {samples} samples of the gateway's threads (idle threads included):")
    for group, n in totals.most_common():
        print(f"  {group:<40} {n / max(samples, 1):>6.1%}")


async def profile(args: argparse.Namespace) -> None:
    if not postgres_available():
        print("PostgreSQL does not answer on 127.0.0.1:5432: nothing measured")
        return
    log = Path(args.log)
    unreadable = readable(log)
    if unreadable:
        print(f"the server log {log} cannot be read ({unreadable}): nothing measured")
        return
    work = Path(tempfile.mkdtemp(prefix="bench-llm-gateway-pg-"))
    nats = NatsServer(work / "nats").start()
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    stub = spawn(
        [sys.executable, "-m", "quiz_testkit.anthropic_stub", "--port", str(stub_port)],
        None,
        work / "stub.log",
    )
    try:
        await wait_http(f"{stub_url}/v1/messages")
        with postgres_database("bench_llm_gw_trips") as url:
            name = url.rsplit("/", 1)[1]
            admin = dict(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
            with psycopg.connect(**admin, autocommit=True) as conn:  # type: ignore[arg-type]
                conn.execute(f'ALTER DATABASE "{name}" SET log_min_duration_statement = 0')
            env = gateway_env(nats.url, url, stub_url)
            env["QUIZ_DATA_DIR"] = str(work / "data")
            env["LLM_GATEWAY_CAP_SLICE_CALLS"] = str(args.slices)
            gateway = spawn(
                [sys.executable, "-m", "quiz_llm_gateway.main"], env, work / "gateway.log"
            )
            try:
                nc = await nats_connect(nats.url)
                await wait_gateway(nc)
                call = gateway_caller(nc)
                await run_level(call, 1, 50)
                await asyncio.sleep(0.5)
                start = log_size(log)
                spy = start_spy(args.py_spy, gateway.pid, work) if args.py_spy else None
                if spy is not None:
                    await asyncio.sleep(1.0)  # py-spy attached before the first call
                _, wall = await run_level(call, args.concurrency, args.calls)
                if spy is not None:
                    spy.send_signal(signal.SIGINT)
                    await asyncio.to_thread(spy.wait, 30)
                await asyncio.sleep(0.5)
                text = read_from(log, start)
                await nc.drain()
            finally:
                gateway.terminate()
                gateway.wait(timeout=20)
        mine = [ln for ln in text.splitlines() if f"@{name} " in ln]
        print(
            f"{args.calls} calls at concurrency {args.concurrency}, slices={args.slices}, "
            f"{args.calls / wall:.0f} calls/s, {wall / args.calls * 1000:.2f} ms of wall per call"
        )
        account(mine, args.calls)
        if args.py_spy:
            spied(work / "spy.txt")
    finally:
        stub.terminate()
        stub.wait(timeout=20)
        nats.stop()


def readable(log: Path) -> str | None:
    """None when `log` can be read, else why not."""
    try:
        log.open("rb").close()
    except OSError as e:
        return str(e)
    return None


def log_size(log: Path) -> int:
    """Bytes in the server log so far: where this run's lines begin."""
    return log.stat().st_size


def read_from(log: Path, offset: int) -> str:
    """The server log from `offset` on."""
    with log.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def start_spy(py_spy: str, pid: int, work: Path) -> subprocess.Popen[bytes]:
    """py-spy recording process `pid`'s threads (raw stacks) into work/spy.txt until SIGINT."""
    args = [py_spy, "record", "-p", str(pid), "-f", "raw", "-r", "500"]
    args += ["-o", str(work / "spy.txt"), "--nonblocking"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls measured")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="calls in flight (group commit batches them)"
    )
    parser.add_argument("--slices", type=int, default=16, help="LLM_GATEWAY_CAP_SLICE_CALLS")
    parser.add_argument("--log", default=str(DEFAULT_LOG), help="the server's log file")
    parser.add_argument(
        "--py-spy", default=None, help="a py-spy binary: also sample the gateway's threads"
    )
    asyncio.run(profile(parser.parse_args()))


if __name__ == "__main__":
    main()
