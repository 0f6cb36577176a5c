"""The arithmetic of a lease, pure: is a holder alive, when does a holder stop trusting its lease.

Both stories of the project's leases stand on it:
- the KV lease (`quiz_servicekit.lease.KvLease`): the server expires an entry `ttl_s` after its
  last write; the holder lets go first, `holder_deadline()` after it SENT its last successful
  renewal (`check_timing` refuses a renewal period that leaves no room for a retry);
- a database-row lease (poll's `poll_ai_runs`): a holder writes its heartbeat; a contender
  takes the row when the heartbeat is stale. The same cut-off decides in Python
  (`beat_fresh`) and in SQL (`WHERE heartbeat_at < :stale` with `stale = stale_before(now,
  ttl_s)`): a beat exactly `ttl_s` old is still alive, in both.
The fencing value of a lease is what its holder wrote when it took it (a KV revision, a row's
`lease_at`): a write is the holder's only while the store still holds that value, which the
store checks itself (update with revision, `UPDATE … WHERE lease_at = :lease`).

Times are seconds on one clock, passed in (epoch seconds as a row stores them, or a monotonic
clock for a holder's own deadline); nothing here reads a clock.
"""

from __future__ import annotations


def stale_before(now: float, ttl_s: float) -> float:
    """The cut-off at `now`: a heartbeat before it (strictly) is stale; seconds."""
    return now - ttl_s


def beat_fresh(beat_at: float | None, now: float, ttl_s: float) -> bool:
    """Whether a holder whose last heartbeat was at `beat_at` is alive at `now` (None: never
    beat, not alive): its beat is at most `ttl_s` old."""
    return beat_at is not None and beat_at >= stale_before(now, ttl_s)


def holder_deadline(sent_at: float, ttl_s: float, margin: float) -> float:
    """When a holder stops trusting a lease it last renewed by a request SENT at `sent_at`.

    The store expires the lease no earlier than `ttl_s` after it WROTE it, which is after the
    send; letting go `ttl_s × (1 − margin)` after the send, by the holder's own clock, keeps it
    first as long as the two clocks' rates differ by less than `margin`.
    """
    return sent_at + ttl_s * (1 - margin)


def check_timing(ttl_s: float, renew_every_s: float, margin: float) -> None:
    """ValueError unless 0 < margin < 0.5 and the renewal comes well before the holder's
    deadline (`renew_every_s < ttl_s × (1 − margin)`), leaving room for a retry."""
    if not 0 < margin < 0.5:
        raise ValueError("margin is a fraction of the ttl in (0, 0.5)")
    if ttl_s <= 0:
        raise ValueError("ttl_s is a duration in seconds, above 0")
    if not 0 < renew_every_s < ttl_s * (1 - margin):
        raise ValueError("renew_every_s must be well under the ttl")
