"""request_id: keyed on the request's content too, shared by replicas (issue 10, item 7).

Two gateway instances (each its own in-memory state) on one real database stand for two
replicas; the real SDK talks to the scripted stub.
"""

from __future__ import annotations

import asyncio
from typing import Any

from quiz_contracts.errors import ErrorCode
from quiz_testkit.anthropic_stub import StubReply

from .test_gateway import expect_error, request


async def test_the_same_id_with_another_request_is_a_conflict(make_rig: Any) -> None:
    rig = make_rig()
    rig.stub.script(StubReply.slow(0.5, StubReply.tool({"findings": []})))
    first = asyncio.create_task(rig.gateway.complete(request(request_id="r-1")))
    await asyncio.sleep(0.2)
    other = request(request_id="r-1", messages=[{"role": "user", "content": "Something else."}])
    # Issue 29 item 10: the caller's code (422), and the message names no internal id.
    in_flight = await expect_error(rig.gateway.complete(other), ErrorCode.idempotency_key_reused)
    assert "different request" in in_flight.message
    done = await first
    after = await expect_error(rig.gateway.complete(other), ErrorCode.idempotency_key_reused)
    assert "r-1" not in after.message and "r-1" not in in_flight.message
    # The same request with less time left is the same request.
    again = await rig.gateway.complete(request(request_id="r-1", deadline_s=5))
    assert again.call_id == done.call_id
    assert len(rig.stub.requests) == 1


async def test_a_retry_on_another_replica_is_not_paid_twice(make_rig: Any) -> None:
    one, two = make_rig(), make_rig()
    one.stub.script(StubReply.slow(0.5, StubReply.tool({"findings": []})))
    a, b = await asyncio.gather(
        one.gateway.complete(request(request_id="r-2")),
        two.gateway.complete(request(request_id="r-2")),
    )
    assert a.call_id == b.call_id and a.output == b.output
    later = await two.gateway.complete(request(request_id="r-2"))
    assert later.call_id == a.call_id and later.usage == a.usage
    assert len(one.stub.requests) == 1
    rows = await one.repo.ledger_rows()
    assert len(rows) == 1


async def test_a_failed_call_may_be_asked_again_anywhere(make_rig: Any) -> None:
    one, two = make_rig(), make_rig()
    one.stub.script(StubReply.error(400), StubReply.tool({"findings": []}))
    await expect_error(one.gateway.complete(request(request_id="r-3")), ErrorCode.llm_failed)
    reply = await two.gateway.complete(request(request_id="r-3"))
    assert reply.output == {"findings": []}
    assert len(one.stub.requests) == 2


async def test_expired_keys_are_pruned(make_rig: Any) -> None:
    rig = make_rig(idempotency_ttl_s=60)
    first = await rig.gateway.complete(request(request_id="r-4"))
    rig.clock.now += 61
    await rig.gateway.sweep()
    assert await rig.repo.request_row("review:teacher-1:r-4") is None
    second = await make_rig(clock=rig.clock).gateway.complete(request(request_id="r-4"))
    assert second.call_id != first.call_id


async def test_a_repeat_outwaited_by_the_call_elsewhere_is_unavailable(make_rig: Any) -> None:
    """A repeat (a caller's retry after a lost reply) that reaches a replica while another
    still answers the id, and outlives its own deadline waiting: `unavailable` with
    retry_after_s — a "not yet, ask again with the same id", which callers retry — never
    `llm_failed`, which review would store as a `failed` version (issue 20)."""
    one, two = make_rig(), make_rig()
    one.stub.script(StubReply.slow(1.0, StubReply.tool({"findings": []})))
    first = asyncio.create_task(one.gateway.complete(request(request_id="r-5")))
    await asyncio.sleep(0.3)
    repeat = asyncio.create_task(two.gateway.complete(request(request_id="r-5", deadline_s=5)))
    await asyncio.sleep(0.1)
    two.clock.now += 10  # the repeat's deadline passes while the first call is in hand
    refused = await expect_error(repeat, ErrorCode.unavailable)
    assert refused.retry_after_s is not None
    done = await first
    # Asked again, the id is answered from the call that was paid.
    again = await two.gateway.complete(request(request_id="r-5"))
    assert again.call_id == done.call_id and len(one.stub.requests) == 1


async def test_a_repeat_joining_a_failed_call_on_its_replica_gets_its_error_once_paid(
    make_rig: Any,
) -> None:
    """Issue 32: the claim as one `async with`. A repeat that joins a call of its replica gets
    that call's very error (one provider request, not two), and the id is released for a later
    ask, which is answered."""
    rig = make_rig()
    rig.stub.script(StubReply.slow(0.3, StubReply.error(400)), StubReply.tool({"findings": []}))
    first = asyncio.create_task(rig.gateway.complete(request(request_id="r-6")))
    await asyncio.sleep(0.1)
    joined = asyncio.create_task(rig.gateway.complete(request(request_id="r-6")))
    one = await expect_error(first, ErrorCode.llm_failed)
    two = await expect_error(joined, ErrorCode.llm_failed)
    assert one is two and len(rig.stub.requests) == 1
    assert await rig.repo.request_row("review:teacher-1:r-6") is None
    again = await rig.gateway.complete(request(request_id="r-6"))
    assert again.output == {"findings": []} and len(rig.stub.requests) == 2


async def test_a_cancelled_first_caller_leaves_its_repeat_to_call_in_its_place(
    make_rig: Any,
) -> None:
    """The first caller cancelled mid-call: its id is released and the repeat that joined it
    on this replica is not cancelled with it, but calls itself and keeps its reply."""
    rig = make_rig()
    rig.stub.script(
        StubReply.slow(0.5, StubReply.tool({"findings": []})), StubReply.tool({"findings": []})
    )
    first = asyncio.create_task(rig.gateway.complete(request(request_id="r-7")))
    await asyncio.sleep(0.1)
    joined = asyncio.create_task(rig.gateway.complete(request(request_id="r-7")))
    await asyncio.sleep(0.1)
    first.cancel()
    reply = await joined
    assert first.cancelled()
    row = await rig.repo.request_row("review:teacher-1:r-7")
    assert row is not None and row.call_id == reply.call_id and row.reply is not None
    again = await rig.gateway.complete(request(request_id="r-7"))
    assert again.call_id == reply.call_id
