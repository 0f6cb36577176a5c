"""A replica's slice of the day's cap: its size, and the holds admitted against it in memory.

Issue 24: admitting each call in its own database transaction made the day row every replica's
meeting point (on PostgreSQL the admission was 28 % of CPU samples). A replica now leases a
slice of what remains of the cap in one conditional UPDATE (`spent + reserved + slice <= cap`,
the slice counted in `reserved` like a hold), admits calls against it here, in memory, and
settles each call as before, its cost moving from the slice to `spent` in the settle's own
transaction. What the replica does not use goes back (idle, shutdown, a call it cannot fit);
a killed replica's slice expires and the sweep returns it.

Everything here is arithmetic on integers (micro-USD) and instants passed in (seconds): no
clock, no I/O. The invariant every method keeps: `0 <= held <= amount`, so the holds admitted
against a slice never exceed what the database reserved for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SliceSizing:
    """How much of the remaining cap one lease takes.

    `calls`: a slice covers this many calls of the worst case that asked for it (0 turns slices
    off: every call is admitted in its own transaction, as before issue 24). `share`: a slice
    never takes more than 1/share of what remains unreserved, so R replicas leave at least
    (1 - 1/share)^R of it to the others. `min_calls`: a slice smaller than that many worst cases
    is not worth leasing — the call is admitted exactly, on its own, against the database (small
    or nearly exhausted caps stay exact).
    """

    calls: int = 16
    share: int = 4
    min_calls: int = 2

    def size(self, remaining_micros: int, worst_micros: int) -> int:
        """Micro-USD to lease for a call of `worst_micros` when `remaining_micros` are
        unreserved; 0 means "admit this call on its own" (slices off, or too little left)."""
        if self.calls <= 0 or worst_micros <= 0 or remaining_micros <= 0:
            return 0
        size = min(self.calls * worst_micros, remaining_micros // max(self.share, 1))
        return size if size >= max(self.min_calls, 1) * worst_micros else 0


@dataclass(slots=True)
class SliceHold:
    """One call's worst case, held against a slice until its settle or `expires_at`."""

    amount_micros: int
    expires_at: float
    # What usage's held_by_purpose splits by (ADR-060 §5).
    purpose: str = ""
    has_person: bool = False


@dataclass(slots=True)
class CapSlice:
    """What this replica leased for one day (`amount` = the lease row's amount as this replica
    last wrote it) and the holds in flight against it."""

    lease_id: str
    amount_micros: int
    expires_at: float
    last_used: float
    holds: dict[str, SliceHold] = field(default_factory=dict)

    @property
    def held_micros(self) -> int:
        """The holds in flight, micro-USD."""
        return sum(h.amount_micros for h in self.holds.values())

    @property
    def free_micros(self) -> int:
        """What a new hold may still take."""
        return self.amount_micros - self.held_micros

    def fits(self, worst_micros: int, hold_expires_at: float) -> bool:
        """Whether a hold of `worst_micros` until `hold_expires_at` can be admitted: it fits in
        what is free, and the slice outlives it (a killed replica's slice is returned only at
        its expiry, never before a hold of it would have expired on its own)."""
        return worst_micros <= self.free_micros and hold_expires_at <= self.expires_at

    def take(
        self,
        hold_id: str,
        worst_micros: int,
        hold_expires_at: float,
        now: float,
        purpose: str = "",
        has_person: bool = False,
    ) -> None:
        """Admit a hold (ValueError when it does not fit)."""
        if not self.fits(worst_micros, hold_expires_at) or hold_id in self.holds:
            raise ValueError("the hold does not fit in the slice")
        self.holds[hold_id] = SliceHold(worst_micros, hold_expires_at, purpose, has_person)
        self.last_used = now

    def settle(self, hold_id: str, cost_micros: int, now: float) -> int:
        """The hold's call is settled at `cost_micros`: its cost leaves the slice (it is spent
        now), the rest of the hold is free again. Returns the cost taken off the slice: what
        the settle's transaction took off the lease row too (never more than the hold)."""
        hold = self.holds.pop(hold_id, None)
        self.last_used = now
        if hold is None:
            return 0  # expired here already: the lease row may still count it, never less
        cost = min(max(cost_micros, 0), hold.amount_micros)
        self.amount_micros -= cost
        return cost

    def drop(self, hold_id: str) -> None:
        """A hold released unused (its call was refused after the hold, e.g. by its rate)."""
        self.holds.pop(hold_id, None)

    def expire(self, now: float) -> int:
        """Forget holds past their expiry (their call was cancelled or hung: as the sweep does
        for a reservation row); returns how many."""
        gone = [h for h, hold in self.holds.items() if hold.expires_at < now]
        for h in gone:
            del self.holds[h]
        return len(gone)

    def grow(self, micros: int, expires_at: float) -> None:
        """The lease row took `micros` more (and lives until `expires_at`)."""
        self.amount_micros += micros
        self.expires_at = max(self.expires_at, expires_at)

    def give_back(self) -> int:
        """What returning the slice now gives back: every free micro-dollar (holds stay)."""
        free = self.free_micros
        self.amount_micros -= free
        return free

    def idle(self, now: float, idle_s: float) -> bool:
        """No hold in flight and none admitted for `idle_s`: time to return it."""
        return not self.holds and now - self.last_used >= idle_s
