"""Group commit: settles queued together commit together; one bad entry fails alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from quiz_llm_gateway.rows import LedgerRow
from quiz_llm_gateway.settlement.writer import SettleWriter
from quiz_testkit.anthropic_stub import StubReply


def row(call_id: str, day: Any) -> LedgerRow:
    return LedgerRow(
        at=datetime.now(UTC),
        day=day,
        call_id=call_id,
        attempt=1,
        purpose="review",
        person=None,
        billed_to=None,
        model="claude-sonnet-4-6",
        effort="low",
        outcome="ok",
        input_tokens=1,
        output_tokens=1,
        cost_micros=18,
    )


async def test_concurrent_settles_commit_in_batches_and_a_bad_one_fails_alone(
    make_rig: Any,
) -> None:
    rig = make_rig()
    day = rig.gateway.today()
    writer = SettleWriter(rig.repo)
    bad = row("bad", day).model_copy(
        update={"purpose": None}
    )  # NOT NULL: this entry cannot be written
    results = await asyncio.gather(
        *[writer.settle(None, row(f"c{i}", day)) for i in range(60)],
        writer.settle(None, bad),
        return_exceptions=True,
    )
    # Each settle answers its day's spent + reserved just after it (issue 31 item 6): one
    # after another under the day row's lock, each 18 more than the one before.
    assert sorted(results[:60]) == [18 * k for k in range(1, 61)]  # type: ignore[type-var]
    assert isinstance(results[60], Exception)
    rows = await rig.repo.ledger_rows()
    assert sorted(r["call_id"] for r in rows) == sorted(f"c{i}" for i in range(60))
    totals = await rig.repo.day_totals(day)
    assert totals is not None and totals.spent_micros == 60 * 18
    # Written again (a replay): nothing changes, and each tells the day as it is.
    again = await asyncio.gather(*[writer.settle(None, row(f"c{i}", day)) for i in range(60)])
    assert again == [60 * 18] * 60
    assert (await rig.repo.day_totals(day)) == totals
    await writer.close()


@pytest.mark.parametrize("n", [1, 3])
async def test_a_lone_settle_is_written_at_once(make_rig: Any, n: int) -> None:
    rig = make_rig()
    writer = SettleWriter(rig.repo)
    for i in range(n):
        await writer.settle(None, row(f"one{i}", rig.gateway.today()))
    assert len(await rig.repo.ledger_rows()) == n
    await writer.close()


async def test_admissions_batched_together_keep_the_rate_limit(
    make_rig: Any,
) -> None:

    from quiz_contracts.errors import ContractError

    from .test_gateway import request

    rig = make_rig(rate_limits={"review": 10})
    results = await asyncio.gather(
        *[rig.gateway.complete(request()) for _ in range(30)], return_exceptions=True
    )
    codes = [r.code.value if isinstance(r, ContractError) else "ok" for r in results]
    assert codes.count("ok") == 10 and codes.count("rate_limited") == 20
    # Each refusal's ledger row written by its rate check (on PostgreSQL inside the batch's
    # one statement per call, issue 32), none for the admitted ones.
    refusals = await rig.repo.ledger_rows(outcome="refused")
    assert len(refusals) == 20 and {r["error_code"] for r in refusals} == {"rate_limited"}
    assert all(r["cost_micros"] == 0 and r["attempt"] == 0 for r in refusals)


async def test_admissions_batched_together_keep_the_cap(make_rig: Any) -> None:
    from decimal import Decimal

    from quiz_contracts.errors import ContractError

    from .test_gateway import request

    # One hold of this request is 0.010428 USD: a 0.032 cap admits three at a time.
    capped = make_rig(daily_cap_usd=Decimal("0.032"))
    capped.stub.script(*[StubReply.slow(0.3, StubReply.tool({"findings": []}))] * 10)
    results = await asyncio.gather(
        *[capped.gateway.complete(request(user=f"t{i}")) for i in range(10)],
        return_exceptions=True,
    )
    codes = [r.code.value if isinstance(r, ContractError) else "ok" for r in results]
    assert codes.count("ok") == 3 and codes.count("llm_budget_exhausted") == 7
