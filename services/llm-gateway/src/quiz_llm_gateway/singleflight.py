"""One answer per idempotency key on this replica: a repeat joins the call in hand or reuses it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

V = TypeVar("V")
# Past this many remembered keys, expired ones are dropped before the next is added.
MAX_KEYS = 10_000


class SingleFlight(Generic[V]):
    """Remembers each key's successful answer for `ttl_s`; failures are forgotten at once."""

    def __init__(self, ttl_s: float, monotonic: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self.monotonic = monotonic
        self._recent: dict[str, tuple[float, asyncio.Future[V]]] = {}

    async def run(self, key: str, work: Callable[[], Awaitable[V]]) -> V:
        """`work()`'s answer, shared by every caller of `key` within the time to live."""
        now = self.monotonic()
        if len(self._recent) > MAX_KEYS:
            self._recent = {k: v for k, v in self._recent.items() if v[0] > now}
        known = self._recent.get(key)
        if known is not None and known[0] > now:
            return await asyncio.shield(known[1])
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._recent[key] = (now + self.ttl_s, future)
        try:
            answer = await work()
        except BaseException as e:
            # Only a success is remembered: a failed call may be asked again.
            self._recent.pop(key, None)
            if isinstance(e, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(e)
                future.exception()  # retrieved: no "never retrieved" warning
            raise
        future.set_result(answer)
        return answer
