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
from collections.abc import Callable, Coroutine
from typing import Any

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
        self._tasks: set[asyncio.Task[None]] = set()

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
        task = asyncio.get_running_loop().create_task(self._flush(evaluation_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for handle in self._scheduled.values():
            handle.cancel()
        self._scheduled.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
