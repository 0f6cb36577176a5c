"""Memory under load: the gateway, review and poll, each one's RSS before, after and idle.

Run: `uv run python bench/memory.py [--gateway 2000] [--reviews 1000] [--answers 2000]
[--idle 30] [--latency-ms 20]`.

What an ops team sizing the pods' memory requests and limits wants to know: does a replica's
resident memory grow with the work it did, and does it come back once the work stops? Everything
real and on 127.0.0.1: a nats-server of its own (the locked bus), the testkit's Anthropic stub as
its own process (no request recording, replies after `--latency-ms`), and the three services as
their own processes (`python -m quiz_<name>.main`, SQLite each), as in production.

After a warm-up (50 of each kind of request: connections, caches, code paths) RSS is read from
/proc/<pid>/status (`VmRSS`) — "before". Then, ~5,000 requests in all:
- `--gateway` `llm.v1.complete` calls straight to the gateway, 32 at a time, each for its own
  teacher (the rate check runs, never refuses);
- `--reviews` question versions published on `questions.v1.version.published` and as many
  `review.v1.requests` for them: review reads each, calls the gateway and publishes its
  `review.v1.completed` (waited for, all of them);
- `--answers` poll answers over HTTP (`POST …/poll/answer`, 32 connections, JWT-verified) on an
  anonymous brainstorm, so the poll's AI moderation batches ideas through the gateway too.
RSS "after" is read at once when the last completes, then "idle" after `--idle` seconds of
nothing. Printed per service: the three figures in MiB, after/before and idle/before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import nats

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_contracts.poll import BrainstormOpen, PollAck
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, free_port, nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.question_events import arithmetic_mcq

SCHEMA = {
    "type": "object",
    "properties": {"findings": {"type": "array", "items": {"type": "string"}}},
    "required": ["findings"],
}
CONCURRENCY = 32
WARM = 50


def rss_mib(pid: int) -> float:
    """Resident set size of `pid` (VmRSS), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def gateway_calls(url: str) -> dict[str, float]:
    """`quiz_llm_gateway_calls_total` from the gateway's /metrics, by `purpose/outcome`."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("quiz_llm_gateway_calls_total{"):
            labels = dict(
                part.split("=", 1)
                for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            key = f"{labels['purpose'].strip(chr(34))}/{labels['outcome'].strip(chr(34))}"
            out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


async def bounded(n: int, concurrency: int, one: Any) -> None:
    """`one(i)` for i < n, at most `concurrency` at once."""
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            await one(queue.pop())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def version_event(i: int, tag: str) -> dict[str, Any]:
    return arithmetic_mcq(
        i,
        question_id=f"mem-q-{tag}-{i}",
        version_id=f"mem-v-{tag}-{i}",
        pool_id="mem-pool",
        prompt_tag=f"Question {i}",
    )


class Load:
    """The three kinds of requests, against the running system."""

    def __init__(self, nc: nats.NATS, poll_url: str, keys: SigningKeys) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.poll_url = poll_url
        self.keys = keys
        self.evaluation = f"mem{uuid.uuid4().hex[:8]}"
        self.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=CONCURRENCY), timeout=60)

    async def gateway(self, n: int) -> None:
        async def one(_: int) -> None:
            req = CompleteRequest(
                purpose="review",
                user=f"mem-{uuid.uuid4().hex[:12]}",
                messages=[{"role": "user", "content": "Relis cette question."}],
                output_schema={"name": "review", "json_schema": SCHEMA},
                max_output_tokens=400,
            )
            await request(self.nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=60)

        await bounded(n, CONCURRENCY, one)

    async def reviews(self, n: int) -> None:
        tag = uuid.uuid4().hex[:6]
        before = (await self.js.stream_info("REVIEW_EVENTS")).state.messages
        for i in range(n):
            e = version_event(i, tag)
            await self.js.publish(
                "questions.v1.version.published",
                json.dumps(e).encode(),
                headers={"Nats-Msg-Id": f"vp:{e['versionId']}"},
            )
        for i in range(n):
            e = version_event(i, tag)
            body = {"questionId": e["questionId"], "versionId": e["versionId"], "user": None}
            await self.js.publish(
                "review.v1.requests",
                json.dumps({**body, "requestId": f"mem-{tag}-{i}"}).encode(),
                headers={"Nats-Msg-Id": f"rr:{e['versionId']}"},
            )
        # Every request answered: one review.v1.completed each.
        deadline = time.monotonic() + 600
        while (await self.js.stream_info("REVIEW_EVENTS")).state.messages - before < n:
            if time.monotonic() > deadline:
                raise RuntimeError("review did not answer every request in 10 minutes")
            await asyncio.sleep(0.5)

    async def open_poll(self) -> None:
        body = BrainstormOpen.model_validate(
            {
                "evaluationId": self.evaluation,
                "teacherId": "mem-teacher",
                # Anonymous: moderation on, so ideas go to the model in batches.
                "audience": {"kind": "anonymous"},
                "question": {"prompt": "Qu'est-ce qui caractérise le vivant ?", "maxIdeas": 5},
                "openedAt": datetime.now(UTC),
            }
        )
        await request(self.nc, subjects.POLL_OPEN, body, PollAck, timeout=10)
        # The teacher switches the AI on (moderation is on for an anonymous poll).
        staff = self.keys.mint("mem-teacher", {f"evaluation:{self.evaluation}": {"role": "owner"}})
        r = await self.http.post(
            f"{self.poll_url}/app/api/evaluations/{self.evaluation}/poll/reveal",
            json={"ai": True},
            headers={"Authorization": f"Bearer {staff}"},
        )
        if r.status_code != 200:
            raise RuntimeError(f"AI not switched on: {r.status_code} {r.text[:200]}")

    async def answers(self, n: int, offset: int) -> None:
        base = f"{self.poll_url}/app/api/evaluations/{self.evaluation}/poll/answer"

        async def one(i: int) -> None:
            attempt = f"a{offset + i}"
            grant = {"role": "viewer", "attempt": attempt, "guest": True}
            token = self.keys.mint(f"guest-{attempt}", {f"evaluation:{self.evaluation}": grant})
            ideas = [f"idée {(offset + i) % 300}", f"idée {(offset + i * 7) % 300}"]
            for attempt_no in range(3):
                try:
                    r = await self.http.post(
                        base, json={"ideas": ideas}, headers={"Authorization": f"Bearer {token}"}
                    )
                    break
                except httpx.TransportError:
                    # A kept-alive connection the server closed as we sent on it (its idle
                    # timeout): the whole answer is sent again, as a phone would.
                    if attempt_no == 2:
                        raise
            if r.status_code != 200:
                raise RuntimeError(f"answer refused: {r.status_code} {r.text[:200]}")

        await bounded(n, CONCURRENCY, one)


async def bench(args: argparse.Namespace) -> None:
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-memory-"))
    server = NatsServer(work / "nats").start()
    keys = SigningKeys.load_or_create(work / "jwt")
    stub_port = free_port()
    stub = subprocess.Popen(  # noqa: ASYNC220 started once, before any load
        [
            sys.executable,
            "-m",
            "quiz_testkit.anthropic_stub",
            "--port",
            str(stub_port),
            "--delay-ms",
            str(args.latency_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    common = {"NATS_URL": server.url, "LOG_LEVEL": "WARNING", "JWKS_FILE": str(keys.jwks_path)}
    services = {
        "llm-gateway": ServiceProcess(
            "quiz_llm_gateway.main",
            {
                **common,
                "DATABASE_URL": f"sqlite:///{work / 'gateway.db'}",
                "ANTHROPIC_API_KEY": "bench-key",
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{stub_port}",
                "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
                "LLM_DAILY_CAP_USD": "1000000",
                "QUIZ_DATA_DIR": str(work / "gateway"),
            },
            work / "gateway.log",
        ),
        "review": ServiceProcess(
            "quiz_review.main",
            {
                **common,
                "DATABASE_URL": f"sqlite:///{work / 'review.db'}",
                "REVIEW_NIGHT_AT_START": "false",
                "QUIZ_DATA_DIR": str(work / "review"),
            },
            work / "review.log",
        ),
        "poll": ServiceProcess(
            "quiz_poll.main",
            {
                **common,
                "DATABASE_URL": f"sqlite:///{work / 'poll.db'}",
                "QUIZ_DATA_DIR": str(work / "poll"),
            },
            work / "poll.log",
        ),
    }
    started: list[ServiceProcess] = []
    try:
        for proc in services.values():
            started.append(proc.start())
        nc = await nats_connect(server.url)
        load = Load(nc, services["poll"].url, keys)
        try:
            await load.open_poll()
            await asyncio.gather(load.gateway(WARM), load.reviews(WARM), load.answers(WARM, 0))
            before = {name: rss_mib(p.pid) for name, p in services.items()}
            t = time.perf_counter()
            await asyncio.gather(
                load.gateway(args.gateway),
                load.reviews(args.reviews),
                load.answers(args.answers, WARM),
            )
            load_s = time.perf_counter() - t
            after = {name: rss_mib(p.pid) for name, p in services.items()}
            await asyncio.sleep(args.idle)
            idle = {name: rss_mib(p.pid) for name, p in services.items()}
            calls = await gateway_calls(services["llm-gateway"].url)
        finally:
            await load.http.aclose()
            await nc.close()
        total = args.gateway + args.reviews + args.answers
        print(
            f"{total} requests in {load_s:.0f} s: {args.gateway} gateway calls, {args.reviews} "
            f"review requests (each a gateway call), {args.answers} poll answers (anonymous: "
            f"AI moderation through the gateway); stub latency {args.latency_ms:g} ms"
        )
        print(
            "  gateway calls answered, by purpose and outcome (warm-up and idle included): "
            + ", ".join(f"{k} {v:.0f}" for k, v in sorted(calls.items()))
        )
        print(
            f"  {'service':<14}{'before MiB':>12}{'after MiB':>12}{f'idle {args.idle:g} s':>12}"
            f"{'after/before':>14}{'idle/before':>13}"
        )
        for name in services:
            print(
                f"  {name:<14}{before[name]:>12.1f}{after[name]:>12.1f}{idle[name]:>12.1f}"
                f"{after[name] / before[name]:>14.2f}{idle[name] / before[name]:>13.2f}"
            )
        print(
            f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
            f"on {os.cpu_count()} cores"
        )
    finally:
        for proc in reversed(started):
            proc.stop()
        stub.terminate()
        stub.wait(10)
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", type=int, default=2000, help="llm.v1.complete calls")
    parser.add_argument("--reviews", type=int, default=1000, help="review.v1.requests")
    parser.add_argument("--answers", type=int, default=2000, help="poll answers over HTTP")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds idle before the last")
    parser.add_argument("--keep", default=None, help="a directory for the logs and databases")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the stub's reply delay")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
