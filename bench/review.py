"""The review's night (ADR-060 §5) over 5,000 candidate versions, the model at LLM-like latency.

Run: `uv run python bench/review.py [--versions 5000] [--latency 1.0] [--cap 4] [--baseline 30]`.

A nats-server of its own, the real llm-gateway as its own process (daily cap `--cap` USD), the
testkit's Anthropic stub in this process answering every review after `--latency` seconds with
a fixed usage (1,500 tokens in, 800 out: 0.011 USD at claude-sonnet-5-5's 2/10 USD per MTok),
and the review service served in this process on SQLite, its clock at 02:00 Zurich.

1. `--versions` published versions of an opted-in pool arrive as `questions.v1.version.published`
   events (plain JSON on JetStream, as the question store publishes them): the time until the
   read model holds them all is printed (events per second).
2. One run of the night with the batch raised to all of them: newest first, one call at a time,
   each call preceded by its `llm.v1.usage` (spend, holds, the call's worst case). Printed: the
   candidates query, calls per minute, and the share check — spent (the gateway's ledger) ≤ share
   = 25 % of the cap, and spent + the next call's worst case > share (it stopped because the
   next call would cross, to the cent and below).
3. Baseline in the same run: `--baseline` of the same review calls straight to the gateway
   (`llm.v1.complete`, one at a time, no usage query, no database). Ratio: the night's calls per
   minute over the baseline's (1.0 would be no overhead at all).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from quiz_contracts.llm import Purpose
from quiz_review.config import Settings
from quiz_review.domain.prompt import review_request
from quiz_review.main import create_app
from quiz_review.service import ReviewService
from quiz_servicekit.llm import LlmClient
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

ZURICH = ZoneInfo("Europe/Zurich")
USAGE = {"input_tokens": 1500, "output_tokens": 800}
POOL = "bench-pool"


def config(i: int) -> dict[str, Any]:
    """An mcq of the platform's shape, a little different each time."""
    return {
        "configVersion": 2,
        "prompt": f"Question {i} : combien font {i % 97} + {i % 89} ?",
        "choices": [
            {"text": str(i % 97 + i % 89), "correct": True},
            {"text": str(i % 97 + i % 89 + 1), "correct": False},
            {"text": str(i % 97 + i % 89 - 1), "correct": False},
        ],
        "mode": "single",
        "policy": "inherit",
        "shuffleChoices": True,
    }


def event(i: int) -> dict[str, Any]:
    return {
        "questionId": f"bench-q-{i}",
        "poolId": POOL,
        "versionId": f"bench-v-{i}-{uuid.uuid4().hex[:6]}",
        "versionNumber": 1,
        "type": "mcq",
        "config": config(i),
        "explanation": "",
        # One a minute over the last days: every version has its own publication time.
        "publishedAt": datetime.fromtimestamp(1_780_000_000 + 60 * i, UTC).isoformat(),
        "live": True,
        "internalName": f"q{i}",
    }


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


async def publish_versions(nats_url: str, n: int) -> None:
    nc = await nats_connect(nats_url)
    js = nc.jetstream()
    pending = []
    for i in range(n):
        e = event(i)
        pending.append(
            js.publish_async(
                "questions.v1.version.published",
                json.dumps(e).encode(),
                headers={"Nats-Msg-Id": f"vp:{e['versionId']}"},
            )
        )
        if len(pending) >= 500:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await js.publish_async_completed()
    await nc.drain()


async def bench(args: argparse.Namespace) -> None:
    stub = AnthropicStub()
    stub.start()
    reply = StubReply.slow(args.latency, StubReply.tool({"findings": []}, usage=USAGE))
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        d = Path(tmp)
        server = NatsServer(d / "nats").start()
        gateway_env = {
            "NATS_URL": server.url,
            "DATABASE_URL": f"sqlite:///{d / 'gateway.db'}",
            "ANTHROPIC_API_KEY": "bench-key",
            "ANTHROPIC_BASE_URL": stub.base_url,
            "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
            "LLM_DAILY_CAP_USD": str(args.cap),
            "QUIZ_DATA_DIR": str(d),
            "LOG_LEVEL": "WARNING",
        }
        gateway = ServiceProcess("quiz_llm_gateway.main", gateway_env, d / "gateway.log").start()
        try:
            await run(args, stub, reply, server.url, d)
        finally:
            gateway.stop()
            server.stop()
            stub.stop()


async def run(
    args: argparse.Namespace, stub: AnthropicStub, reply: StubReply, nats_url: str, d: Path
) -> None:
    clock = Clock(datetime(2026, 7, 2, 2, 0, tzinfo=ZURICH).astimezone(UTC))
    settings = Settings(
        nats_url=nats_url,
        database_url=f"sqlite:///{d / 'review.db'}",
        night_at_start=False,
        night_interval_s=1e6,
        night_batch=args.versions,
        log_level="WARNING",
    )
    app = create_app(settings, clock=clock)
    async with serve_app(app, settings):
        service: ReviewService = app.state.review()
        await service.set_pool(POOL, True, "bench")

        started = time.perf_counter()
        await publish_versions(nats_url, args.versions)
        while len(await service.repo.night_rows()) < args.versions:  # noqa: ASYNC110 polls a DB
            await asyncio.sleep(0.1)
        loaded_s = time.perf_counter() - started
        print(
            f"read model: {args.versions} version events in {loaded_s:.1f} s "
            f"({args.versions / loaded_s:.0f} events/s)"
        )

        query = []
        for _ in range(5):
            t = time.perf_counter()
            await service.repo.night_rows()
            query.append((time.perf_counter() - t) * 1000)
        print(f"candidates query over {args.versions} versions: {statistics.median(query):.0f} ms")

        stub.script(*[reply for _ in range(args.versions)])
        started = time.perf_counter()
        night = await service.run_night()
        night_s = time.perf_counter() - started
        night_rate = night.reviewed * 60 / night_s
        print(
            f"night: {night.reviewed} reviews of {night.candidates} candidates in {night_s:.1f} s, "
            f"ended by {night.outcome}: {night_rate:.1f} calls/min "
            f"(stub latency {args.latency:g} s: at most {60 / args.latency:.1f} calls/min)"
        )
        # Newest first: the reviewed versions are the most recently published ones.
        order = [json.loads(_document(r.body))["config"]["prompt"] for r in stub.requests[:3]]
        print(f"first reviewed: {order}")

        budget = service.last_budget
        usage = await service.usage()
        assert budget is not None
        spent = usage.by_purpose[Purpose.review].no_person.cost_usd
        share = budget.share_usd
        worst = budget.next_usd or Decimal(0)
        print(
            f"share = {settings.night_share} × cap {usage.cap_usd} = {share} USD; "
            f"spent by the night (gateway ledger) {spent} USD; next call's worst case {worst} USD"
        )
        respected = spent <= share and spent + worst > share
        print(
            f"share respected to the cent: spent {spent:.2f} ≤ share {share:.2f} "
            f"(exact: {spent} ≤ {share}, {share - spent} left < next worst case {worst}): "
            f"{'yes' if respected else 'NO'}"
        )
        # The night stops on its own check, never on the gateway's refusal.
        assert night.outcome == "share_spent", night.outcome

        n = min(args.baseline, max(night.reviewed, 1))
        stub.script(*[reply for _ in range(n)])
        nc = await nats_connect(nats_url)
        llm = LlmClient(nc)
        started = time.perf_counter()
        for i in range(n):
            await llm.complete(review_request("mcq", config(10_000 + i), "", user=None))
        base_s = time.perf_counter() - started
        await nc.drain()
        base_rate = n * 60 / base_s
        print(f"baseline: {n} review calls straight to the gateway: {base_rate:.1f} calls/min")
        print(f"ratio night / baseline: {night_rate / base_rate:.3f}")


def _document(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    return text.split("-----\n", 1)[1].split("\n-----", 1)[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--versions", type=int, default=5000)
    p.add_argument("--latency", type=float, default=1.0, help="the stub's seconds per reply")
    p.add_argument("--cap", type=Decimal, default=Decimal("4"), help="daily cap, USD")
    p.add_argument("--baseline", type=int, default=30, help="calls of the baseline")
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
