"""A paid call is recorded even when the replica that took it is gone with its disk (issue 20,
item 4): the settle journal is the JetStream stream LLM_JOURNAL, which any replica replays.

Real processes: two gateway processes on the session's locked nats-server (each connects as
the `llm-gateway` bus user, so the test also proves the permission table gives it that
stream), the real database (SQLite; PostgreSQL behind a TCP proxy the test shuts), the stub.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.settlement.journal import entries_of
from quiz_servicekit.db import Database
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.scripts import eventually

from .conftest import leased
from .test_durable_settle import Outage
from .test_gateway import request as complete_request

pytestmark = pytest.mark.integration
PENDING = "quiz_llm_gateway_settle_journal_pending"


def gateway(nats_url: str, database_url: str, stub: AnthropicStub, data: Path) -> ServiceProcess:
    """A gateway process whose data directory (and so its local journal) is `data`."""
    data.mkdir(parents=True, exist_ok=True)
    env = {
        "NATS_URL": nats_url,
        "DATABASE_URL": database_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": stub.base_url,
        "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
        "LLM_GATEWAY_SETTLE_TIMEOUT_S": "2",
        "LLM_GATEWAY_SWEEP_INTERVAL_S": "0.5",
        "QUIZ_DATA_DIR": str(data),
        "OTEL_SDK_DISABLED": "true",
    }
    return ServiceProcess("quiz_llm_gateway.main", env, data / "gateway.log")


def pending_gauge(proc: ServiceProcess) -> float | None:
    """The replica's journal gauge as /metrics shows it (None: not exported)."""
    with urllib.request.urlopen(f"{proc.url}/metrics", timeout=5) as r:  # noqa: S310
        text = r.read().decode()
    found = re.search(rf"^{PENDING} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def test_a_replica_killed_during_an_outage_leaves_its_paid_call_to_another(
    migrated_url: str, nats_url: str, anthropic_stub: AnthropicStub, tmp_path: Path
) -> None:
    outage = Outage(migrated_url)
    repo = Repository(Database(migrated_url, threads=2))
    database_id = await repo.database_id()
    subject = subjects.llm_journal_subject(database_id)
    nc = await nats_connect(nats_url)
    js = nc.jetstream()
    first = gateway(nats_url, await outage.gateway_url(), anthropic_stub, tmp_path / "a")
    second = gateway(nats_url, migrated_url, anthropic_stub, tmp_path / "b")
    try:
        await asyncio.to_thread(first.start)
        anthropic_stub.script(
            StubReply.slow(1.0, StubReply.tool({"findings": []}, usage={"input_tokens": 1000}))
        )
        call = asyncio.create_task(
            request(
                nc,
                subjects.LLM_COMPLETE,
                complete_request(request_id="killed-1", deadline_s=30),
                CompleteReply,
                timeout=40,
            )
        )
        await eventually(lambda: anthropic_stub.requests)
        await outage.begin()  # the database goes away while the provider answers
        reply = await call
        assert reply.output == {"findings": []}

        # Its settle and its stored reply are on the stream, nothing on the replica's disk.
        async def on_stream() -> bool:
            info = await js.stream_info(subjects.LLM_JOURNAL_STREAM, subjects_filter=subject)
            return sum((info.state.subjects or {}).values()) == 2

        await eventually(on_stream)
        assert entries_of(tmp_path / "a" / "llm-gateway-journal") == []
        await eventually(lambda: pending_gauge(first) == 2)

        os.killpg(first.pid, signal.SIGKILL)  # kill -9 before the database returns
        await asyncio.to_thread(first.stop)
        outage.end()
        assert await repo.ledger_rows(call_id=reply.call_id) == []

        # A fresh replica, another (empty) data directory: it records the call at start.
        await asyncio.to_thread(second.start)

        async def recorded() -> bool:
            return bool(await repo.ledger_rows(call_id=reply.call_id))

        await eventually(recorded)
        [row] = await repo.ledger_rows(call_id=reply.call_id)
        assert row["outcome"] == "ok" and row["cost_micros"] > 0
        day = row["day"]
        totals = await repo.day_totals(day)
        assert totals is not None
        assert totals.spent_micros == row["cost_micros"]
        # What is still reserved is the killed replica's slice, returned at its expiry
        # (test_cap_slices): no call's hold.
        assert totals.reserved_micros == await leased(repo)
        await eventually(lambda: pending_gauge(second) == 0)
        assert not await on_stream()

        # The same request id is answered from the stored reply: not paid again.
        again = await request(
            nc,
            subjects.LLM_COMPLETE,
            complete_request(request_id="killed-1", deadline_s=30),
            CompleteReply,
            timeout=40,
        )
        assert again == reply and len(anthropic_stub.requests) == 1
        print(f"\njournal stream: 2 entries replayed by a fresh replica, spend {totals}")
    finally:
        await asyncio.to_thread(first.stop)
        await asyncio.to_thread(second.stop)
        outage.end()
        if outage.proxy is not None:
            outage.proxy.refuse()
        await nc.drain()
        repo.db.close()
