"""The per-person rate limit of "Fix with AI" as one number per person (GCRA).

A token bucket of `limit` tokens refilled at `limit` per `window_s` (the tool's limiter,
apps/api/src/routes/ai.js, is one too), kept as its *theoretical arrival time*: the instant the
bucket will be full again. With `interval = window_s / limit`:

- the bucket is full at any `tat <= now`; a request is admitted while `tat - now` leaves room
  for one more interval within the window (`max(tat, now) + interval - now <= window_s`);
- an admitted request moves `tat` to `max(tat, now) + interval`;
- a refused one leaves `tat` as it was and waits `max(tat, now) + interval - now - window_s`.

So `limit` requests pass at once from a full bucket, then one per `interval`. One stored float
per person makes the database operation a single row read and write.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether a request is admitted, the person's next `tat`, and the wait when refused."""

    allowed: bool
    tat: float
    retry_after_s: float = 0.0
    remaining: int = 0


def admit(tat: float | None, now: float, limit: int, window_s: float) -> RateDecision:
    """The decision for one request of a person whose stored `tat` is `tat` (None: never seen).

    `limit` 0 admits everything. `remaining` is how many more requests would pass right now.
    """
    if limit <= 0:
        return RateDecision(True, now, remaining=0)
    interval = window_s / limit
    start = now if tat is None or tat < now else tat
    after = start + interval
    # A tiny tolerance: float sums of `interval` must not refuse the limit-th request.
    slack = interval * 1e-9
    if after - now > window_s + slack:
        return RateDecision(False, start, retry_after_s=after - now - window_s)
    remaining = int((window_s + slack - (after - now)) // interval)
    return RateDecision(True, after, remaining=max(0, min(limit - 1, remaining)))
