"""Leases on JetStream KV against a real nats-server: exclusion, renewal, expiry, takeover."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS
from nats.js.kv import KeyValue

from quiz_servicekit.lease import KvLease, LeaseLost, default_holder_id, lease_bucket
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.scripts import ScriptProcess, eventually

pytestmark = pytest.mark.integration
PROCS = Path(__file__).parent / "procs"


@pytest.fixture
async def bucket(nc: NATS) -> AsyncIterator[str]:
    name = f"lease-{uuid.uuid4().hex[:10]}"
    yield name
    await nc.jetstream().delete_key_value(name)


async def test_one_holder_at_a_time_and_release_hands_over(nc: NATS, bucket: str) -> None:
    kv = await lease_bucket(nc.jetstream(), bucket, ttl_s=5)
    a = KvLease(kv, "night", holder="a", ttl_s=5)
    b = KvLease(kv, "night", holder="b", ttl_s=5)
    assert await a.try_acquire()
    assert not await b.try_acquire()
    assert not await b.acquire(timeout_s=0.5, poll_s=0.1)
    assert a.held and a.token is not None and not b.held
    assert await b.current_holder() == "a"
    await a.release()
    assert not a.held and a.token is None
    assert await b.try_acquire()
    assert await a.current_holder() == "b"
    await b.release()
    assert await a.current_holder() is None


async def test_renewal_keeps_the_lease_past_its_ttl(nc: NATS, bucket: str) -> None:
    kv = await lease_bucket(nc.jetstream(), bucket, ttl_s=1.5)
    a = KvLease(kv, "batch.poll-7", holder="a", ttl_s=1.5)
    b = KvLease(kv, "batch.poll-7", holder="b", ttl_s=1.5)
    assert await a.try_acquire()
    first = a.token
    assert first is not None
    await asyncio.sleep(4.0)  # well past the ttl: only renewals keep it
    assert a.held and not a.lost.is_set()
    assert (a.token or 0) > first
    assert not await b.try_acquire()
    await a.release()


async def test_a_partitioned_holder_lets_go_before_another_takes_over(
    nats_url: str, nc: NATS, bucket: str
) -> None:
    kv = await lease_bucket(nc.jetstream(), bucket, ttl_s=2)
    cut_off = await nats_connect(nats_url)
    a = KvLease(await cut_off.jetstream().key_value(bucket), "night", holder="a", ttl_s=2)
    b = KvLease(kv, "night", holder="b", ttl_s=2)
    assert await a.try_acquire()
    await cut_off.close()  # the holder can no longer reach NATS: it cannot renew
    assert await b.acquire(timeout_s=30, poll_s=0.1)
    # By its own clock the old holder gave up before the server let the other one in.
    assert not a.held
    await eventually(a.lost.is_set, 10)
    assert await b.current_holder() == "b"
    await b.release()


async def test_a_holder_learns_it_was_taken_over(nc: NATS, bucket: str) -> None:
    kv = await lease_bucket(nc.jetstream(), bucket, ttl_s=3)
    a = KvLease(kv, "night", holder="a", ttl_s=3)
    b = KvLease(kv, "night", holder="b", ttl_s=3)
    assert await a.try_acquire()
    await kv.delete("night")  # an operator frees it by hand
    assert await b.try_acquire()
    with pytest.raises(LeaseLost):
        await a.renew()
    assert a.lost.is_set() and not a.held
    assert await a.current_holder() == "b"
    await a.release()  # a no-op: not ours any more
    assert await a.current_holder() == "b"
    await b.release()


async def test_run_exclusive_runs_once_and_cancels_work_when_the_lease_is_lost(
    nc: NATS, bucket: str
) -> None:
    kv: KeyValue = await lease_bucket(nc.jetstream(), bucket, ttl_s=1.5)
    a = KvLease(kv, "night", holder="a", ttl_s=1.5)
    b = KvLease(kv, "night", holder="b", ttl_s=1.5)

    async def work() -> str:
        return "reviewed"

    assert await a.run_exclusive(work) == (True, "reviewed")
    assert await a.current_holder() is None  # released after the run

    assert await b.try_acquire()
    assert await a.run_exclusive(work) == (False, None)
    await b.release()

    cancelled = asyncio.Event()

    async def long_work() -> str:
        try:
            await kv.delete("night")  # someone frees the lease behind our back…
            assert await b.try_acquire()  # …and another replica takes it
            await asyncio.sleep(60)
            return "too late"
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(LeaseLost):
        await asyncio.wait_for(a.run_exclusive(long_work), 30)
    assert cancelled.is_set()
    assert await a.current_holder() == "b"
    await b.release()


async def test_lease_bucket_is_idempotent_and_follows_the_declared_ttl(
    nc: NATS, bucket: str
) -> None:
    js = nc.jetstream()
    await lease_bucket(js, bucket, ttl_s=5)
    assert (await (await lease_bucket(js, bucket, ttl_s=5)).status()).ttl == pytest.approx(5)
    assert (await (await lease_bucket(js, bucket, ttl_s=9)).status()).ttl == pytest.approx(9)


def test_holder_ids_are_unique_and_readable() -> None:
    one, two = default_holder_id("review"), default_holder_id("review")
    assert one != two and one.startswith("review@")


async def test_killed_holder_process_is_taken_over_by_the_other(
    nats_url: str, nc: NATS, bucket: str, tmp_path: Path
) -> None:
    ttl = "2"
    procs = {
        name: ScriptProcess(
            PROCS / "lease_proc.py",
            nats_url,
            bucket,
            "night",
            ttl,
            name,
            log_path=tmp_path / f"{name}.log",
        )
        for name in ("first", "second")
    }
    try:
        await eventually(lambda: any(p.said("ACQUIRED") for p in procs.values()), 60)
        holder = next(n for n, p in procs.items() if p.said("ACQUIRED"))
        other = "second" if holder == "first" else "first"
        await procs[other].wait_said("WAITING")
        # Held over several ttls: renewed, and the other process never got in.
        await eventually(lambda: sum(x.startswith("HELD") for x in procs[holder].lines()) >= 5)
        assert not procs[other].said("ACQUIRED")
        kv = await nc.jetstream().key_value(bucket)
        probe = KvLease(kv, "night", holder="probe", ttl_s=2)
        assert await probe.current_holder() == holder

        procs[holder].kill()
        await procs[other].wait_said("ACQUIRED", 60)
        assert await probe.current_holder() == other
        assert not procs[other].said("LOST")
    finally:
        for p in procs.values():
            p.stop()
