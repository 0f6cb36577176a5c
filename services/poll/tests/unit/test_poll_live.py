"""Live delivery without I/O: a slow client holds one frame (the latest), a burst of changes is
one flush per interval, and the token cache trusts only what verified, until it expires."""

from __future__ import annotations

import asyncio

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_poll.live import KEEPALIVE, Coalescer, StreamQuota, Subscriber, sse_event
from quiz_poll.tokens import CachingVerifier
from quiz_servicekit.auth import Identity


async def test_a_slow_subscriber_keeps_only_the_latest_frame() -> None:
    slow, fast = Subscriber(), Subscriber()
    for seq in range(1, 101):
        chunk = sse_event("poll.tally", seq, "{}")
        slow.offer(chunk)
        fast.offer(chunk)
        assert await fast.next() == chunk  # the fast one reads every frame
    assert slow.dropped == 99
    assert await slow.next() == sse_event("poll.tally", 100, "{}")
    # Nothing newer: the writer waits; a keep-alive fills only an empty slot.
    waiting = asyncio.create_task(slow.next())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    slow.poke()
    assert await waiting == KEEPALIVE
    slow.offer(b"frame")
    slow.poke()
    assert await slow.next() == b"frame" and slow.dropped == 99


async def test_a_burst_of_changes_is_one_flush_per_interval() -> None:
    flushed: list[float] = []
    loop = asyncio.get_running_loop()

    async def flush(_: str) -> None:
        flushed.append(loop.time())

    coalescer = Coalescer(flush, 0.1)
    for _ in range(500):
        coalescer.touch("ev1")
        await asyncio.sleep(0)
    await asyncio.sleep(0.25)
    assert len(flushed) == 2  # at once, then once at the interval's end
    assert flushed[1] - flushed[0] >= 0.09
    await coalescer.aclose()


class Inner:
    def __init__(self) -> None:
        self.calls = 0

    def verify(self, token: str) -> Identity:
        self.calls += 1
        if token.startswith("bad"):
            raise ContractError(ErrorCode.unauthorized, "invalid token")
        return Identity(sub="u1")


def token(exp: int) -> str:
    import base64
    import json

    payload = base64.urlsafe_b64encode(json.dumps({"sub": "u1", "exp": exp}).encode()).decode()
    return f"h.{payload.rstrip('=')}.s"


def test_the_token_cache_trusts_only_verified_tokens_until_they_expire() -> None:
    now = [1000.0]
    inner = Inner()
    cache = CachingVerifier(inner, size=2, clock=lambda: now[0])
    good = token(1100)
    assert cache.verify(good).sub == "u1"
    assert cache.verify(good).sub == "u1"
    assert inner.calls == 1
    for _ in range(2):
        with pytest.raises(ContractError):
            cache.verify("bad" + good)
    assert inner.calls == 3  # a failure is never cached
    now[0] = 1100.0
    cache.verify(good)
    assert inner.calls == 4  # expired: verified again (and the inner verifier decides)
    cache.verify(token(2000))
    cache.verify(token(2001))
    cache.verify(good)
    assert inner.calls == 7  # bounded: the oldest went


def test_streams_are_capped_per_participant_and_per_token() -> None:
    quota = StreamQuota(per_participant=2, per_token=3)
    first = quota.acquire("guest", "t1")
    quota.acquire("guest", "t1")
    with pytest.raises(ContractError) as refused:
        quota.acquire("guest", "t2")  # another token, the same participant
    assert refused.value.code is ErrorCode.rate_limited
    assert refused.value.details == {"limit": 2, "per": "participant"}
    quota.acquire("teacher", "t1")
    with pytest.raises(ContractError) as refused:
        quota.acquire("someone", "t1")  # another participant, the same token
    assert refused.value.details == {"limit": 3, "per": "token"}
    # A place given back is free again, once: a second release gives nothing more back.
    first.release()
    first.release()
    assert quota.open_for("guest", "t1") == (1, 2)
    quota.acquire("guest", "t2")
    with pytest.raises(ContractError):
        quota.acquire("guest", "t3")
