"""Slices of the day's cap (issue 24): leased, admitted against in memory, given back, and
returned by a sweep when their replica is killed. Real database (SQLite, and PostgreSQL when it
answers), the real SDK against the stub; the last test runs real gateway processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from quiz_contracts import subjects
from quiz_contracts.errors import ErrorCode
from quiz_contracts.llm import CompleteReply
from quiz_llm_gateway.domain.days import budget_day
from quiz_llm_gateway.domain.pricing import estimate_input_tokens
from quiz_llm_gateway.rows import Repository
from quiz_servicekit.db import Database
from quiz_servicekit.natsio import request as nats_request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.scripts import eventually

from .conftest import NOON
from .test_gateway import expect_error, request
from .test_journal_stream import gateway

pytestmark = pytest.mark.integration


def worst_case_usage(body: dict[str, Any]) -> StubReply:
    """A valid review billed exactly at the gateway's worst case: holds and costs line up."""
    tokens = estimate_input_tokens(body.get("system"), body["messages"], body.get("tools"))
    return StubReply.tool(
        {"findings": []}, usage={"input_tokens": tokens, "output_tokens": body["max_tokens"]}
    )


async def reserved_and_spent(repo: Repository) -> tuple[int, int]:
    from datetime import UTC, datetime

    totals = await repo.day_totals(budget_day(datetime.fromtimestamp(NOON, UTC)))
    assert totals is not None
    return totals.reserved_micros, totals.spent_micros


async def test_a_slice_is_leased_once_admits_in_memory_and_goes_back_when_idle(
    make_rig: Any,
) -> None:
    rig = make_rig(cap_slice_calls=16, cap_slice_idle_s=2.0)
    rig.stub.default = StubReply.callable(worst_case_usage)
    req = request(user=None, purpose="poll")
    worst = rig.gateway.estimate_micros(req)
    for _ in range(3):
        await rig.gateway.complete(req)
    # One lease of 16 worst cases; three calls' costs moved from it to the spend.
    [(_, amount, expires_at)] = await rig.repo.leases()
    assert amount == 16 * worst - 3 * worst
    assert expires_at == NOON + rig.gateway.settings.cap_slice_ttl_s
    reserved, spent = await reserved_and_spent(rig.repo)
    assert (reserved, spent) == (amount, 3 * worst)
    assert await rig.repo.open_reservations() == (0, 0)  # no reservation row per call
    assert len(await rig.repo.ledger_rows()) == 3

    await rig.gateway.slices.keep()  # not idle for 2 s yet: kept
    assert len(await rig.repo.leases()) == 1
    rig.clock.now += 2.0
    await rig.gateway.slices.keep()  # idle: the whole slice goes back
    assert await rig.repo.leases() == []
    assert await reserved_and_spent(rig.repo) == (0, 3 * worst)


async def test_a_small_cap_stays_exact_call_by_call(make_rig: Any) -> None:
    """A cap of three worst cases: a slice (≥ 2 worst cases, ≤ a quarter of what remains) is
    never leased; each call holds its own row, the third still fits, the fourth is refused."""
    probe = make_rig()
    worst = probe.gateway.estimate_micros(request(user=None, purpose="poll"))
    rig = make_rig(daily_cap_usd=Decimal(3 * worst) / 1_000_000)
    rig.stub.default = StubReply.callable(worst_case_usage)
    req = request(user=None, purpose="poll")
    for _ in range(3):
        await rig.gateway.complete(req)
    await expect_error(rig.gateway.complete(req), ErrorCode.llm_budget_exhausted)
    assert await rig.repo.leases() == []
    assert await reserved_and_spent(rig.repo) == (0, 3 * worst)


async def test_a_nearly_exhausted_cap_waits_for_another_replicas_idle_slice_at_most_idle_s(
    make_rig: Any,
) -> None:
    """Replica A leases a slice and goes idle; B's call does not fit in what is left unleased
    and is refused, until A gives its idle slice back (≤ cap_slice_idle_s + cap_slice_keep_s):
    then B is admitted. And B's own slice goes back before B refuses anything."""
    probe = make_rig()
    worst = probe.gateway.estimate_micros(request(user=None, purpose="poll"))
    cap = 12 * worst
    a = make_rig(daily_cap_usd=Decimal(cap) / 1_000_000, cap_slice_idle_s=2.0)
    b = make_rig(daily_cap_usd=Decimal(cap) / 1_000_000, cap_slice_idle_s=2.0, clock=a.clock)
    a.stub.default = StubReply.callable(worst_case_usage)
    req = request(user=None, purpose="poll")
    await a.gateway.complete(req)  # A leases 12w // 4 = 3w, spends w
    [(_, amount, _)] = await a.repo.leases()
    assert amount == 2 * worst
    # B: 9w unleased → slices of 2w while they fit, then exact calls, all of 9w spent.
    for _ in range(9):
        await b.gateway.complete(req)
    await expect_error(b.gateway.complete(req), ErrorCode.llm_budget_exhausted)
    reserved, spent = await reserved_and_spent(a.repo)
    assert (reserved, spent) == (2 * worst, 10 * worst)  # only A's idle slice is held
    a.clock.now += 2.0
    await a.gateway.slices.keep()  # A's slice is idle: back to the day
    for _ in range(2):
        await b.gateway.complete(req)
    assert await reserved_and_spent(a.repo) == (0, cap)  # every micro-dollar, not one more
    await expect_error(b.gateway.complete(req), ErrorCode.llm_budget_exhausted)


async def test_a_person_limit_stays_exact_with_slices(make_rig: Any) -> None:
    """The per-person rate is not sliced: two replicas share it exactly (10 pass, 11th not)."""
    a = make_rig(rate_limits={"review": 10})
    b = make_rig(rate_limits={"review": 10}, clock=a.clock)
    a.stub.default = StubReply.callable(worst_case_usage)
    for i in range(10):
        await (a if i % 2 else b).gateway.complete(request(user="teacher-9"))
    refused = await expect_error(
        a.gateway.complete(request(user="teacher-9")), ErrorCode.rate_limited
    )
    assert refused.retry_after_s is not None
    # The refused call's hold went back to the slice: nothing held but the slices' free part.
    assert (
        a.gateway.slices.free_micros() + b.gateway.slices.free_micros()
        == (await reserved_and_spent(a.repo))[0]
    )


def gateway_process(nats_url: str, url: str, stub: AnthropicStub, data: Path) -> ServiceProcess:
    """A gateway process whose slices live 3 s unless renewed, and are never idle."""
    proc = gateway(nats_url, url, stub, data)
    proc.env.update(
        LLM_GATEWAY_RESERVATION_GRACE_S="0.5",
        LLM_GATEWAY_CAP_SLICE_TTL_S="3",
        LLM_GATEWAY_CAP_SLICE_IDLE_S="600",
    )
    return proc


async def test_a_killed_replicas_slice_is_returned_by_the_sweep_after_its_ttl(
    migrated_url: str, nats_url: str, anthropic_stub: AnthropicStub, tmp_path: Path
) -> None:
    repo = Repository(Database(migrated_url, threads=2))
    nc = await nats_connect(nats_url)
    first = gateway_process(nats_url, migrated_url, anthropic_stub, tmp_path / "a")
    second = gateway_process(nats_url, migrated_url, anthropic_stub, tmp_path / "b")
    anthropic_stub.default = StubReply.callable(worst_case_usage)
    try:
        await asyncio.to_thread(first.start)
        req = request(user=None, purpose="poll", deadline_s=1)
        replies = [
            await nats_request(nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=10)
            for _ in range(2)
        ]
        [(lease_id, amount, expires_at)] = await repo.leases()
        assert amount > 0
        # Alive, the replica renews its slice (ttl 3 s, renewed below 2.25 s left).
        await eventually(lambda: _renewed(repo, expires_at), timeout_s=10)

        os.killpg(first.pid, signal.SIGKILL)  # kill -9: the slice is not given back
        await asyncio.to_thread(first.stop)
        [(still, amount_left, expiry)] = await repo.leases()
        assert still == lease_id and amount_left == amount
        day = (await repo.ledger_rows(call_id=replies[0].call_id))[0]["day"]
        totals = await repo.day_totals(day)
        assert totals is not None and totals.reserved_micros == amount_left

        await asyncio.to_thread(second.start)  # another replica: its sweep returns it
        ready_at = time.time()

        async def returned() -> bool:
            return await repo.leases() == []

        await eventually(returned, timeout_s=15)
        # Returned at its expiry (never before: a live replica renews it), by the next sweep
        # (0.5 s) of a replica that is up; a bound with room for a loaded host, not a timing.
        assert time.time() <= max(ready_at, expiry) + 0.5 + 3
        totals = await repo.day_totals(day)
        assert totals is not None
        rows = await repo.ledger_rows()
        assert totals.reserved_micros == 0
        assert totals.spent_micros == sum(r["cost_micros"] for r in rows) > 0
    finally:
        await asyncio.to_thread(first.stop)
        await asyncio.to_thread(second.stop)
        await nc.drain()
        repo.db.close()


async def _renewed(repo: Repository, first_expiry: float) -> bool:
    leases = await repo.leases()
    return len(leases) == 1 and leases[0][2] > first_expiry
