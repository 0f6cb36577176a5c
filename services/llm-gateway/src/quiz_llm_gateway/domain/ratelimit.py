"""Sliding-log rate limit arithmetic: exact at the boundary, with the wait until a slot frees."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether an event is admitted and, if not, how long until the oldest counted one leaves."""

    allowed: bool
    retry_after_s: float = 0.0


def decide(
    events_in_window: list[float], limit: int, now_s: float, window_s: float
) -> RateDecision:
    """Admit when fewer than `limit` events are in (now - window, now]; else wait for the oldest."""
    counted = sorted(t for t in events_in_window if t > now_s - window_s)
    if len(counted) < limit:
        return RateDecision(True)
    # The (len - limit + 1)-th oldest must leave before one more fits.
    freeing = counted[len(counted) - limit]
    return RateDecision(False, max(freeing + window_s - now_s, 0.001))
