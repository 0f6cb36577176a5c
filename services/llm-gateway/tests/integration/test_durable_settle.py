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
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_llm_gateway.call.anthropic import AnthropicProvider
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.service import Gateway
from quiz_llm_gateway.settlement.journal import entries_of
from quiz_llm_gateway.settlement.stream_journal import StreamJournal
from quiz_servicekit.db import Database
from quiz_servicekit.metrics import ServiceMetrics
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.tcp_proxy import TcpProxy

from .conftest import NOON, HandClock, gateway_settings, leased
from .test_gateway import request

# The session's journal key (set by the test kit), which every gateway of the session signs with.
JOURNAL_KEY = os.environ["LLM_GATEWAY_JOURNAL_KEY"].encode()


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

    async def resume(self) -> None:
        """The database answers the gateway again (the proxy listens again)."""
        self.end()
        if self.proxy is not None:
            self.proxy.accept()


def build_gateway(
    url: str,
    stub: AnthropicStub,
    journal: Path,
    busy_ms: int = 60_000,
    clock: HandClock | None = None,
    stream: StreamJournal | None = None,
) -> tuple[Gateway, Database, AnthropicProvider]:
    db = Database(url, threads=2, sqlite_busy_timeout_ms=busy_ms)
    provider = AnthropicProvider("test-key", stub.base_url, 10)
    settings = gateway_settings(settle_journal_dir=str(journal), settle_timeout_s=2.0)
    clock = clock or HandClock()
    gateway = Gateway(
        settings,
        Repository(db),
        provider,
        GatewayMetrics(ServiceMetrics("llm-gateway", CollectorRegistry())),
        clock=clock.time,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
        journal_stream=stream,
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
    # The day row does not know this call: no quota to tell (issue 31), never a wrong one.
    assert reply.remaining_usd is None
    [entry] = entries_of(journal)
    held, row = entry.held, entry.row
    assert row is not None and held is not None
    assert row.call_id == reply.call_id and row.outcome == "ok"
    assert row.cost_micros == 1000 * 3 + row.output_tokens * 15 > 0

    await gateway.close()  # stopped while the database still refuses: the journal stays
    db.close()
    await provider.close()
    assert len(entries_of(journal)) == 1
    outage.end()

    repo = Repository(Database(migrated_url, threads=2))
    try:
        assert await repo.ledger_rows(call_id=reply.call_id) == []  # only the journal has it
        # The stopped replica could not return its slice of the cap (issue 24): a sweep
        # returns it once it expires — the restarted replica's, started after that.
        later = HandClock(NOON + gateway.settings.cap_slice_ttl_s + 1)
        restarted, db2, provider2 = build_gateway(
            migrated_url, anthropic_stub, journal, clock=later
        )
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
    assert totals is not None and totals.reserved_micros == await leased(rig.repo)
    [row] = await rig.repo.ledger_rows()
    assert row["outcome"] == "error" and row["error_code"] == "llm_failed"
    assert totals.spent_micros == row["cost_micros"] == 10 * 3 + 10 * 15


async def test_a_database_outage_answers_unavailable_never_internal(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path, outage: Outage
) -> None:
    """Issue 20, item 4: four callers ask without pause while the database is unreachable for
    3 s; every answer is a paid reply or `unavailable` with retry_after_s, and once the
    database is back calls are admitted again."""
    url = await outage.gateway_url()
    gateway, db, provider = build_gateway(url, anthropic_stub, tmp_path / "journal", busy_ms=300)
    anthropic_stub.default = StubReply.slow(0.2, StubReply.auto())
    answers: list[tuple[str, str]] = []  # (phase, outcome)
    phase = "before"
    stop = asyncio.Event()

    async def caller(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            seen = phase
            try:
                # One teacher per call: the per-person limit is not what this test is about.
                await gateway.complete(request(user=f"t-{i}-{n}", request_id=f"c-{i}-{n}"))
                answers.append((seen, "ok"))
            except ContractError as e:
                assert e.code is ErrorCode.unavailable, e
                assert e.retry_after_s is not None and e.retry_after_s > 0
                answers.append((seen, e.code.value))
                await asyncio.sleep(0.05)
            # Anything else (a raw database error: `internal` on the wire) fails the test.

    callers = [asyncio.create_task(caller(i)) for i in range(4)]
    try:
        await asyncio.sleep(1.0)
        phase = "outage"
        await outage.begin()
        await asyncio.sleep(3.0)
        with pytest.raises(ContractError) as info:
            await gateway.availability()
        assert info.value.code is ErrorCode.unavailable
        await outage.resume()
        phase = "after"
        await asyncio.sleep(2.0)
    finally:
        stop.set()
        await asyncio.gather(*callers)
    during = [o for p, o in answers if p == "outage"]
    print(
        f"\noutage: {len(answers)} answers, during the outage {during.count('unavailable')} "
        f"unavailable, {during.count('ok')} paid"
    )
    assert "unavailable" in during
    assert ("after", "ok") in answers, "calls are admitted again once the database is back"
    assert {o for _, o in answers} <= {"ok", "unavailable"}
    await gateway.sweep()  # what was journaled during the outage lands
    totals = await gateway.repo.day_totals(gateway.today())
    ledger = await gateway.repo.ledger_rows()
    assert totals is not None and totals.reserved_micros == await leased(gateway.repo)
    assert totals.spent_micros == sum(r["cost_micros"] for r in ledger)
    assert sum(r["outcome"] == "ok" for r in ledger) == answers.count(("before", "ok")) + sum(
        1 for p, o in answers if p != "before" and o == "ok"
    )
    await gateway.close()
    db.close()
    await provider.close()


async def test_a_paid_reply_is_answered_when_its_bookkeeping_is_refused(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path, outage: Outage
) -> None:
    """Issue 20, item 4: the database goes away while the provider answers: the settle and
    the request id's reply are journaled and the caller gets its reply (it was answered
    `internal` before: the idempotency-key write's error escaped). Once the database is back,
    another replica (another journal directory) answers the same request id from the stored
    reply without a second provider call."""
    url = await outage.gateway_url()
    journal = tmp_path / "journal"
    gateway, db, provider = build_gateway(url, anthropic_stub, journal, busy_ms=300)
    anthropic_stub.script(
        StubReply.slow(0.5, StubReply.tool({"findings": []}, usage={"input_tokens": 1000}))
    )
    call = asyncio.create_task(gateway.complete(request(request_id="paid-1")))
    for _ in range(500):
        if anthropic_stub.requests:
            break
        await asyncio.sleep(0.01)
    await outage.begin()
    reply = await call
    assert reply.output == {"findings": []}
    kinds = sorted("reply" if e.reply is not None else "settle" for e in entries_of(journal))
    assert kinds == ["reply", "settle"]
    await outage.resume()
    await gateway.sweep()
    assert entries_of(journal) == []
    await gateway.close()
    db.close()
    await provider.close()

    other, db2, provider2 = build_gateway(migrated_url, anthropic_stub, tmp_path / "other")
    try:
        again = await other.complete(request(request_id="paid-1"))
        assert again == reply
        assert len(anthropic_stub.requests) == 1, "paid once"
        [row] = await other.repo.ledger_rows(call_id=reply.call_id)
        assert row["outcome"] == "ok"
        totals = await other.repo.day_totals(other.today())
        assert totals is not None and totals.reserved_micros == await leased(other.repo)
        assert totals.spent_micros == row["cost_micros"]
    finally:
        await other.close()
        db2.close()
        await provider2.close()


async def test_a_reply_journaled_longer_than_its_claim_lives_is_not_paid_again(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path, outage: Outage, nc: NATS
) -> None:
    """Issue 20, item 3: the database stays away longer than a request id's claim lives
    (deadline + grace, 180 s). Once it is back, another replica asked the same request id
    answers it from the reply journaled on JetStream — its claim replays the journal first —
    instead of claiming the id afresh and paying a second time."""
    js = nc.jetstream()
    # LLM_JOURNAL: provisioned with the session's nats-server (NatsServer.start).
    url = await outage.gateway_url()
    clock = HandClock()
    replicas = [
        build_gateway(
            url,
            anthropic_stub,
            tmp_path / name,
            busy_ms=300,
            clock=clock,
            stream=StreamJournal(js, timeout_s=3, key=JOURNAL_KEY),
        )
        for name in ("a", "b")
    ]
    (first, _, _), (second, _, _) = replicas
    try:
        await second.sweep()  # at start: it knows its database
        anthropic_stub.script(StubReply.slow(0.5, StubReply.tool({"findings": []})))
        call = asyncio.create_task(first.complete(request(request_id="long-1")))
        for _ in range(500):
            if anthropic_stub.requests:
                break
            await asyncio.sleep(0.01)
        await outage.begin()
        reply = await call  # its settle and reply are on the stream
        with contextlib.suppress(Exception):
            await second.sweep()  # a sweep during the outage: the journal is not empty
        clock.now += 300  # past the claim (60 + 120 s), within the reply's 600 s
        await outage.resume()
        again = await second.complete(request(request_id="long-1"))
        assert again == reply
        assert len(anthropic_stub.requests) == 1, "paid twice"
        assert len(await second.repo.ledger_rows(outcome="ok")) == 1
    finally:
        for gateway, db, provider in replicas:
            with contextlib.suppress(Exception):
                await gateway.close()
            db.close()
            await provider.close()


async def test_a_request_id_whose_call_failed_during_an_outage_is_free_after_the_next_sweep(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path, outage: Outage
) -> None:
    """A call fails (the provider refuses it) while the database is away, so its request id
    cannot be released: once the database is back the next sweep releases it, and the caller's
    repeat is answered at once, not told `unavailable` until the claim expires (deadline +
    grace, 140 s in the chaos suite, longer than its callers retry)."""
    url = await outage.gateway_url()
    gateway, db, provider = build_gateway(url, anthropic_stub, tmp_path / "journal", busy_ms=300)
    try:
        anthropic_stub.script(StubReply.slow(0.5, StubReply.error(400)))
        call = asyncio.create_task(gateway.complete(request(request_id="fails-1")))
        for _ in range(500):
            if anthropic_stub.requests:
                break
            await asyncio.sleep(0.01)
        await outage.begin()
        with pytest.raises(ContractError):
            await call
        await outage.resume()
        await gateway.sweep()
        anthropic_stub.script(StubReply.tool({"findings": []}))
        again = await asyncio.wait_for(gateway.complete(request(request_id="fails-1")), 10)
        assert again.output == {"findings": []}
        assert len(anthropic_stub.requests) == 2
    finally:
        with contextlib.suppress(Exception):
            await gateway.close()
        db.close()
        await provider.close()


def gauge(gateway: Gateway) -> float:
    """The replica's quiz_llm_gateway_settle_journal_pending."""
    return gateway.metrics.journal_pending.collect()[0].samples[0].value


async def test_with_jetstream_away_too_the_local_file_keeps_the_settle(
    migrated_url: str,
    anthropic_stub: AnthropicStub,
    tmp_path: Path,
    outage: Outage,
    nats_url: str,
    nc: NATS,
) -> None:
    """Issue 20, item 4: the database and NATS both away: the settle goes to the local file
    (the last resort), the caller gets its reply; NATS back, the sweep moves it to the
    JetStream journal (durable beyond this disk); the database back, it is written."""
    lost = await nats_connect(nats_url)
    stream = StreamJournal(lost.jetstream(), timeout_s=1, key=JOURNAL_KEY)
    url = await outage.gateway_url()
    journal = tmp_path / "journal"
    gateway, db, provider = build_gateway(url, anthropic_stub, journal, busy_ms=300, stream=stream)
    try:
        await gateway.sweep()  # knows its database
        subject = stream.subject
        anthropic_stub.script(StubReply.slow(0.5, StubReply.tool({"findings": []})))
        call = asyncio.create_task(gateway.complete(request()))
        for _ in range(500):
            if anthropic_stub.requests:
                break
            await asyncio.sleep(0.01)
        await outage.begin()
        await lost.close()  # NATS is away too
        reply = await call
        [entry] = entries_of(journal)
        assert entry.row is not None and entry.row.call_id == reply.call_id

        stream.js = nc.jetstream()  # NATS is back, the database still away
        with contextlib.suppress(Exception):
            await gateway.sweep()
        assert entries_of(journal) == []
        info = await nc.jetstream().stream_info(
            subjects.LLM_JOURNAL_STREAM, subjects_filter=subject
        )
        assert sum((info.state.subjects or {}).values()) == 1
        assert gauge(gateway) == 1

        await outage.resume()
        await gateway.sweep()
        [row] = await gateway.repo.ledger_rows(call_id=reply.call_id)
        assert row["outcome"] == "ok"
        totals = await gateway.repo.day_totals(gateway.today())
        assert totals is not None and totals.reserved_micros == await leased(gateway.repo)
        assert totals.spent_micros == row["cost_micros"]
        assert gauge(gateway) == 0
    finally:
        await gateway.close()
        db.close()
        await provider.close()
