"""Single-flight: one piece of work per key at a time on this process; repeats share its answer.

The first caller of a key runs `work()` itself (awaiting it); a caller of the same key while that
runs waits for the same answer instead of running it again. What happens after:
- a success is remembered for `ttl_s` seconds counted from when the work STARTED (as a stored
  reply's lifetime is counted from its claim): callers within that time get it without work.
  `ttl_s=0` remembers nothing: only the callers that overlap the work share it (a cache
  loader, whose cache is the memory);
- a failure is forgotten at once: every caller that waited gets the same exception, and the
  next caller runs the work again;
- the first caller cancelled mid-work: its waiters are not cancelled with it, the first of them
  runs the work again (each caller is cancelled only by its own cancellation).
Time is `monotonic()` (seconds), injected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")
# Past this many remembered keys, expired ones are dropped before the next is added.
MAX_KEYS = 10_000


@dataclass(slots=True)
class _Flight(Generic[V]):
    future: asyncio.Future[V]
    until: float  # monotonic s: the answer is reused before this (once there is one)

    def serves(self, now: float) -> bool:
        return not self.future.done() or (not self.future.cancelled() and self.until > now)


class SingleFlight(Generic[V]):
    """One `work()` per key at a time; its success reused for `ttl_s` s (see module docstring)."""

    def __init__(self, ttl_s: float = 0.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0:
            raise ValueError("ttl_s is a duration in seconds, 0 or more")
        self.ttl_s = ttl_s
        self.monotonic = monotonic
        self._flights: dict[Hashable, _Flight[V]] = {}

    def __len__(self) -> int:
        """Keys in flight or remembered."""
        return len(self._flights)

    def in_flight(self, key: Hashable) -> bool:
        """Whether `key`'s work is running now."""
        flight = self._flights.get(key)
        return flight is not None and not flight.future.done()

    def forget(self, key: Hashable) -> None:
        """Drop `key`'s remembered answer (work in flight still answers its waiters)."""
        flight = self._flights.get(key)
        if flight is not None and flight.future.done():
            del self._flights[key]

    async def run(self, key: Hashable, work: Callable[[], Awaitable[V]]) -> V:
        """`work()`'s answer, shared by every caller of `key` while it runs or is remembered.

        Raises what `work()` raised (to the first caller and every waiter alike).
        """
        while True:
            now = self.monotonic()
            flight = self._flights.get(key)
            if flight is None or not flight.serves(now):
                return await self._lead(key, work, now)
            try:
                return await asyncio.shield(flight.future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if flight.future.cancelled() and (task is None or not task.cancelling()):
                    continue  # the first caller was cancelled, not us: run it ourselves
                raise

    async def _lead(self, key: Hashable, work: Callable[[], Awaitable[V]], now: float) -> V:
        if len(self._flights) > MAX_KEYS:
            self._flights = {k: f for k, f in self._flights.items() if f.serves(now)}
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        flight = _Flight(future, now + self.ttl_s)
        self._flights[key] = flight
        try:
            answer = await work()
        except BaseException as e:
            # Only a success is remembered: a failed call may be asked again.
            if self._flights.get(key) is flight:
                del self._flights[key]
            if isinstance(e, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(e)
                future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        future.set_result(answer)
        if self.ttl_s == 0 and self._flights.get(key) is flight:
            del self._flights[key]
        return answer
