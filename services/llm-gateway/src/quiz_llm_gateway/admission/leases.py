"""This replica's slices of the day's cap: lease, admit in memory, renew, give back (issue 24).

The arithmetic is `domain/slices.py`; this module adds the database (`Repository.lease_slice`,
`renew_lease`, `return_lease`) and the order of things on one event loop: a hold taken here
is a plain in-memory step (no await between the check and the take), leases, renewals and
returns of the slices run one at a time under a lock, and a slice being returned is removed
from the book before its transaction starts, so no hold is ever taken from an amount on its
way back to the day.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import date

from quiz_llm_gateway.domain.slices import CapSlice, SliceSizing
from quiz_llm_gateway.rows import Held, HeldRow, Repository

log = logging.getLogger(__name__)
Tag = tuple[str, bool]  # a hold's purpose and whether a person made the call
# A slice is renewed once less than this share of its time to live is left.
RENEW_BELOW = 0.75


class CapSlices:
    """The slices this replica leased, one per budget day, and the holds admitted on them.

    `hold()` answers a hold from the slice (leasing or growing it when it cannot cover the
    call), or None: the call is then admitted on its own in the database, exactly as without
    slices — slices off (`sizing.calls == 0`), or too little of the cap left for a slice.
    """

    def __init__(
        self,
        repo: Repository,
        sizing: SliceSizing,
        *,
        cap_micros: int,
        ttl_s: float,
        idle_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.repo = repo
        self.sizing = sizing
        self.cap_micros = cap_micros
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self.clock = clock
        self._by_day: dict[date, CapSlice] = {}
        self._by_id: dict[str, CapSlice] = {}
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        """Whether calls are admitted against slices at all."""
        return self.sizing.calls > 0 and self.cap_micros > 0

    def _take(self, s: CapSlice, day: date, worst: int, expires_at: float, tag: Tag) -> Held:
        held = Held(str(uuid.uuid4()), day, worst, s.lease_id)
        s.take(held.id, worst, expires_at, self.clock(), *tag)
        return held

    async def hold(
        self, day: date, worst_micros: int, expires_at: float, tag: Tag = ("", False)
    ) -> Held | None:
        """Hold `worst_micros` until `expires_at` against this replica's slice of `day`; None
        when the call must be admitted on its own. Raises what the database raised (an outage
        is the caller's `unavailable`)."""
        if not self.enabled:
            return None
        s = self._by_day.get(day)
        if s is not None and s.fits(worst_micros, expires_at):
            return self._take(s, day, worst_micros, expires_at, tag)
        async with self._lock:
            return await self._hold_locked(day, worst_micros, expires_at, tag)

    async def _hold_locked(self, day: date, worst: int, expires_at: float, tag: Tag) -> Held | None:
        s = self._by_day.get(day)
        if s is not None and s.fits(worst, expires_at):  # another call grew it meanwhile
            return self._take(s, day, worst, expires_at, tag)
        now = self.clock()
        lives_until = max(now + self.ttl_s, expires_at)
        if s is not None and worst <= s.free_micros:
            # It fits but would outlive the slice: renew the lease first.
            if await self.repo.renew_lease(s.lease_id, lives_until):
                s.expires_at = max(s.expires_at, lives_until)
                return self._take(s, day, worst, expires_at, tag)
            self._forget(s)
            s = None
        for _ in range(2):
            lease_id = s.lease_id if s is not None else str(uuid.uuid4())
            got = await self.repo.lease_slice(
                lease_id=lease_id,
                exists=s is not None,
                day=day,
                cap_micros=self.cap_micros,
                worst_micros=worst,
                sizing=self.sizing,
                now=now,
                expires_at=lives_until,
            )
            if got is None:  # a sweep returned our lease (we were paused past its expiry)
                log.warning("cap slice %s was returned by a sweep; leasing a new one", lease_id)
                if s is not None:
                    self._forget(s)
                s = None
                continue
            if got > 0:
                if s is None:
                    s = CapSlice(lease_id, 0, lives_until, now)
                    self._by_day[day] = s
                    self._by_id[lease_id] = s
                s.grow(got, lives_until)
                if s.fits(worst, expires_at):
                    return self._take(s, day, worst, expires_at, tag)
            break
        # Too little of the cap is left for a slice: this replica's own free part goes back,
        # so the exact per-call admission that follows can use every micro-dollar of it.
        if s is not None:
            await self._give_back(day, s)
        return None

    def settled(self, held: Held | None, cost_micros: int) -> None:
        """`held`'s call was settled at `cost_micros` (in the database or a journal)."""
        if held is None or held.lease_id is None:
            return
        s = self._by_id.get(held.lease_id)
        if s is not None:
            s.settle(held.id, cost_micros, self.clock())

    def dropped(self, held: Held) -> None:
        """`held` was refused after its hold (its rate): nothing was spent."""
        s = self._by_id.get(held.lease_id or "")
        if s is not None:
            s.drop(held.id)

    def _forget(self, s: CapSlice) -> None:
        self._by_id.pop(s.lease_id, None)
        for day, other in list(self._by_day.items()):
            if other is s:
                del self._by_day[day]

    async def _give_back(self, day: date, s: CapSlice) -> int:
        """Return what `s` does not hold (the whole lease row when no hold is in flight)."""
        if not s.holds:
            self._forget(s)  # before the await: nothing can be taken from it any more
            return await self.repo.return_lease(s.lease_id, day, 0, drop=True)
        free = s.give_back()
        if free <= 0:
            return 0
        return await self.repo.return_lease(s.lease_id, day, free, drop=False)

    async def keep(self) -> None:
        """Every `keep_s` (main.py): forget holds past their expiry, return idle slices,
        renew the others before they expire. A failure (database away) is logged; an
        unrenewed slice then expires and any replica's sweep returns it."""
        async with self._lock:
            now = self.clock()
            for day, s in list(self._by_day.items()):
                s.expire(now)
                try:
                    if s.idle(now, self.idle_s):
                        await self._give_back(day, s)
                    elif s.expires_at - now < self.ttl_s * RENEW_BELOW:
                        lives_until = now + self.ttl_s
                        if await self.repo.renew_lease(s.lease_id, lives_until):
                            s.expires_at = max(s.expires_at, lives_until)
                        else:
                            self._forget(s)
                except Exception as e:
                    log.warning("cap slice %s not kept (%s)", s.lease_id, type(e).__name__)

    async def close(self) -> None:
        """At stop (after the settles in hand): give every free micro-dollar back."""
        async with self._lock:
            for day, s in list(self._by_day.items()):
                s.expire(self.clock())
                try:
                    await self._give_back(day, s)
                except Exception as e:
                    log.warning("cap slice %s not returned (%s)", s.lease_id, type(e).__name__)

    def held_rows(self, day: date) -> list[HeldRow]:
        """This replica's holds in flight on `day`'s slice, by (purpose, has person)."""
        s = self._by_day.get(day)
        if s is None:
            return []
        sums: dict[tuple[str, bool], int] = {}
        for hold in s.holds.values():
            key = (hold.purpose, hold.has_person)
            sums[key] = sums.get(key, 0) + hold.amount_micros
        return [HeldRow(p or None, hp, amount) for (p, hp), amount in sums.items()]

    def free_micros(self) -> int:
        """What this replica's slices could still admit (tests, gauges)."""
        return sum(s.free_micros for s in self._by_day.values())
