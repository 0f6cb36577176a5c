"""Live delivery: SSE subscribers that never slow each other, and per-poll frame coalescing.

A frame is whole (never a delta), so a client only ever needs the LATEST one: each subscriber
holds one slot. Offering a frame overwrites the slot (the older frame is dropped and counted)
and wakes the client's writer; the publisher never waits on a socket. So 2,000 phones, one of
them on a dying connection, cost the poll one slot write each per frame.

Coalescing: a change marks its poll dirty; a flush runs at once if the last one is older than
the interval, else at the interval's end. A burst of answers is one frame per interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_servicekit.tasks import TaskSet

SseChunk = bytes


def sse_event(event: str, seq: int, data: str) -> bytes:
    """One SSE message: `event`, `id` (the seq, for Last-Event-ID), one `data` line (JSON)."""
    return f"event: {event}\nid: {seq}\ndata: {data}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"


class Subscriber:
    """One SSE client: a one-frame slot and a wake-up.

    Its writer awaits a bare future (no task, no timer per frame: `asyncio.wait_for` cost more
    than the write itself across 2,000 clients); keep-alives come from one periodic `poke` of
    every subscriber, which fills an empty slot only.
    """

    __slots__ = ("_latest", "_waiter", "dropped")

    def __init__(self) -> None:
        self._latest: bytes | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.dropped = 0

    def offer(self, chunk: bytes) -> bool:
        """Put the newest frame in the slot; True when it replaced a frame never sent."""
        replaced = self._latest is not None and self._latest is not KEEPALIVE
        self._latest = chunk
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if replaced:
            self.dropped += 1
        return replaced

    def poke(self) -> None:
        """A keep-alive comment, unless a frame is waiting to be sent anyway."""
        if self._latest is None:
            self.offer(KEEPALIVE)

    async def next(self) -> bytes:
        """The latest frame (or a keep-alive), once there is one."""
        while self._latest is None:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        chunk, self._latest = self._latest, None
        return chunk


class StreamQuota:
    """Open SSE streams counted per participant and per token, each under its cap.

    A stream holds a socket and a slot for as long as the client keeps it, so one guest (or one
    leaked token) opening hundreds would cost every frame hundreds of writes. `acquire` refuses
    past either cap with 429 `rate_limited` (`{code, message, details}`); `release` gives the
    place back and is idempotent per acquired ticket, so the route may call it from both the
    stream's end and the response's background task. Counts are this replica's: behind a load
    balancer spreading one client's streams, the cap is per replica.
    """

    def __init__(self, per_participant: int, per_token: int) -> None:
        self.per_participant = per_participant
        self.per_token = per_token
        self._participants: dict[Hashable, int] = {}
        self._tokens: dict[Hashable, int] = {}

    def open_for(self, participant: Hashable, token: Hashable) -> tuple[int, int]:
        """(streams of the participant, streams of the token) open now."""
        return self._participants.get(participant, 0), self._tokens.get(token, 0)

    def acquire(self, participant: Hashable, token: Hashable) -> StreamTicket:
        """A place for one more stream; 429 `rate_limited` past either cap."""
        mine, theirs = self.open_for(participant, token)
        if mine >= self.per_participant or theirs >= self.per_token:
            by_participant = mine >= self.per_participant
            limit = self.per_participant if by_participant else self.per_token
            raise ContractError(
                ErrorCode.rate_limited,
                f"At most {limit} open streams per {'participant' if by_participant else 'token'}:"
                " close one first.",
                details={"limit": limit, "per": "participant" if by_participant else "token"},
            )
        self._participants[participant] = mine + 1
        self._tokens[token] = theirs + 1
        return StreamTicket(self, participant, token)

    def _release(self, participant: Hashable, token: Hashable) -> None:
        for counts, key in ((self._participants, participant), (self._tokens, token)):
            left = counts.get(key, 0) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)


class StreamTicket:
    """One acquired place of a `StreamQuota`; `release()` gives it back once."""

    __slots__ = ("_participant", "_quota", "_token")

    def __init__(self, quota: StreamQuota, participant: Hashable, token: Hashable) -> None:
        self._quota: StreamQuota | None = quota
        self._participant = participant
        self._token = token

    def release(self) -> None:
        quota, self._quota = self._quota, None
        if quota is not None:
            quota._release(self._participant, self._token)


class Coalescer:
    """At most one `flush(evaluation)` per interval per poll; changes in between ride along."""

    def __init__(
        self,
        flush: Callable[[str], Coroutine[Any, Any, None]],
        interval_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._flush = flush
        self._interval = interval_s
        self._monotonic = monotonic
        self._last: dict[str, float] = {}
        self._scheduled: dict[str, asyncio.TimerHandle | asyncio.Handle] = {}
        self._tasks = TaskSet("poll-frames")

    def touch(self, evaluation_id: str) -> None:
        """Something of the poll changed: a flush is due (now, or at the interval's end)."""
        if evaluation_id in self._scheduled:
            return
        loop = asyncio.get_running_loop()
        wait = self._last.get(evaluation_id, -1e9) + self._interval - self._monotonic()
        if wait <= 0:
            self._scheduled[evaluation_id] = loop.call_soon(self._run, evaluation_id)
        else:
            self._scheduled[evaluation_id] = loop.call_later(wait, self._run, evaluation_id)

    def _run(self, evaluation_id: str) -> None:
        self._scheduled.pop(evaluation_id, None)
        self._last[evaluation_id] = self._monotonic()
        self._tasks.spawn(self._flush(evaluation_id), name=f"poll-flush:{evaluation_id}")

    async def aclose(self) -> None:
        for handle in self._scheduled.values():
            handle.cancel()
        self._scheduled.clear()
        await self._tasks.close()
