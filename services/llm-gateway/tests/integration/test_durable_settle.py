"""A paid call is never unrecorded (issue 10, item 3).

(a) The database refuses connections (PostgreSQL: the gateway reaches it through a TCP proxy
that the test shuts; SQLite: another connection holds the write lock, so every write fails as
"database is locked"): the caller still gets its reply — its settle is in the write-ahead
journal —, the gateway stops, the database comes back, a new gateway starts on the same
journal: the ledger row is there and the spend counts. (b) Every path after the provider's
answer settles (a reply the validator chokes on).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_llm_gateway.journal import entries_of
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.provider import AnthropicProvider
from quiz_llm_gateway.repository import Repository
from quiz_llm_gateway.service import Gateway
from quiz_servicekit.db import Database
from quiz_servicekit.metrics import ServiceMetrics
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.tcp_proxy import TcpProxy

from .conftest import HandClock, gateway_settings
from .test_gateway import request


class Outage:
    """Makes the database refuse the gateway's writes, then lets it back."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = make_url(url).get_backend_name()
        self.proxy: TcpProxy | None = None
        self.lock: sqlite3.Connection | None = None

    async def gateway_url(self) -> str:
        if self.dialect != "postgresql":
            return self.url
        parsed = make_url(self.url)
        self.proxy = TcpProxy(parsed.host or "127.0.0.1", parsed.port or 5432).start()
        return parsed.set(host="127.0.0.1", port=self.proxy.port).render_as_string(
            hide_password=False
        )

    async def begin(self) -> None:
        if self.proxy is not None:
            self.proxy.refuse()
        else:
            path = make_url(self.url).database
            assert path
            self.lock = sqlite3.connect(path, isolation_level=None)
            self.lock.execute("BEGIN EXCLUSIVE")

    def end(self) -> None:
        if self.lock is not None:
            self.lock.execute("ROLLBACK")
            self.lock.close()
            self.lock = None


def build_gateway(
    url: str, stub: AnthropicStub, journal: Path, busy_ms: int = 60_000
) -> tuple[Gateway, Database, AnthropicProvider]:
    db = Database(url, threads=2, sqlite_busy_timeout_ms=busy_ms)
    provider = AnthropicProvider("test-key", stub.base_url, 10)
    settings = gateway_settings(settle_journal_dir=str(journal), settle_timeout_s=2.0)
    clock = HandClock()
    gateway = Gateway(
        settings,
        Repository(db),
        provider,
        GatewayMetrics(ServiceMetrics("llm-gateway", CollectorRegistry())),
        clock=clock.time,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    return gateway, db, provider


@pytest.fixture
async def outage(migrated_url: str) -> AsyncIterator[Outage]:
    o = Outage(migrated_url)
    yield o
    o.end()
    if o.proxy is not None:
        o.proxy.stop()


async def test_a_settle_survives_a_stop_while_the_database_refuses(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path, outage: Outage
) -> None:
    journal = tmp_path / "journal"
    url = await outage.gateway_url()
    gateway, db, provider = build_gateway(url, anthropic_stub, journal, busy_ms=300)
    anthropic_stub.script(
        StubReply.slow(0.5, StubReply.tool({"findings": []}, usage={"input_tokens": 1000}))
    )
    call = asyncio.create_task(gateway.complete(request()))
    for _ in range(500):  # admitted (the hold is written) and at the provider
        if anthropic_stub.requests:
            break
        await asyncio.sleep(0.01)
    await outage.begin()
    reply = await call  # the reply comes once the settle is durable — in the journal
    [(held, row)] = entries_of(journal)
    assert row.call_id == reply.call_id and row.outcome == "ok" and held is not None
    assert row.cost_micros == 1000 * 3 + row.output_tokens * 15 > 0

    await gateway.close()  # stopped while the database still refuses: the journal stays
    db.close()
    await provider.close()
    assert len(entries_of(journal)) == 1
    outage.end()

    repo = Repository(Database(migrated_url, threads=2))
    try:
        assert await repo.ledger_rows(call_id=reply.call_id) == []  # only the journal has it
        restarted, db2, provider2 = build_gateway(migrated_url, anthropic_stub, journal)
        await restarted.sweep()  # what the service runs at start
        [ledger] = await repo.ledger_rows(call_id=reply.call_id)
        assert ledger["outcome"] == "ok" and ledger["cost_micros"] == row.cost_micros
        totals = await repo.day_totals(held.day)
        assert totals is not None
        assert totals.spent_micros == row.cost_micros and totals.reserved_micros == 0
        usage = await restarted.usage(held.day)
        assert usage.spent_usd * 1_000_000 == row.cost_micros
        assert entries_of(journal) == []
        await restarted.sweep()  # a second replay changes nothing
        assert (await repo.day_totals(held.day)) == totals
        await restarted.close()
        db2.close()
        await provider2.close()
    finally:
        repo.db.close()


@pytest.mark.parametrize("depth", [300, 600], ids=["validator", "serialiser"])
async def test_every_path_after_the_answer_settles(make_rig: Any, depth: int) -> None:
    """A paid reply nobody can read is settled, and the caller gets llm_failed: a recursive
    schema with an answer nested 300 deep (the validator runs out of stack), 600 deep (the
    SDK's content cannot be serialised)."""
    rig = make_rig()
    schema = {
        "name": "tree",
        "json_schema": {"type": "object", "properties": {"n": {"$ref": "#"}}},
    }
    nested: dict[str, Any] = {}
    for _ in range(depth):
        nested = {"n": nested}
    rig.stub.script(StubReply.tool(nested, usage={"input_tokens": 10, "output_tokens": 10}))
    with pytest.raises(ContractError) as info:
        await rig.gateway.complete(request(output_schema=schema))
    assert info.value.code is ErrorCode.llm_failed
    assert len(rig.stub.requests) == 1
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.reserved_micros == 0
    [row] = await rig.repo.ledger_rows()
    assert row["outcome"] == "error" and row["error_code"] == "llm_failed"
    assert totals.spent_micros == row["cost_micros"] == 10 * 3 + 10 * 15
