"""Lease arithmetic: one cut-off for Python and SQL, a holder that lets go before the store."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quiz_servicekit.lease_time import beat_fresh, check_timing, holder_deadline, stale_before

times = st.floats(min_value=1e9, max_value=2e9, allow_nan=False)
ttls = st.floats(min_value=0.001, max_value=3600, allow_nan=False)


def test_a_beat_exactly_ttl_old_is_alive_and_one_older_is_stale() -> None:
    assert beat_fresh(940.0, now=1000.0, ttl_s=60)
    assert not beat_fresh(939.999, now=1000.0, ttl_s=60)
    assert beat_fresh(1000.0, now=1000.0, ttl_s=60)
    assert not beat_fresh(None, now=1000.0, ttl_s=60)


@given(beat=times, now=times, ttl=ttls)
def test_python_and_the_sql_condition_agree_on_who_is_stale(
    beat: float, now: float, ttl: float
) -> None:
    # The row lease's claim: `UPDATE … WHERE heartbeat_at < :stale` takes a stale row only.
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE run (heartbeat_at REAL)")
    db.execute("INSERT INTO run VALUES (?)", (beat,))
    taken = db.execute(
        "UPDATE run SET heartbeat_at = ? WHERE heartbeat_at < ?", (now, stale_before(now, ttl))
    ).rowcount
    assert taken == (0 if beat_fresh(beat, now, ttl) else 1)


@given(
    sent_at=times,
    ttl=ttls,
    margin=st.floats(min_value=0.01, max_value=0.49),
    delay=st.floats(min_value=0, max_value=10),
    rate=st.floats(min_value=-0.999, max_value=0.999),
)
def test_the_holder_lets_go_before_the_store_expires_the_lease(
    sent_at: float, ttl: float, margin: float, delay: float, rate: float
) -> None:
    # The store writes `delay` s after the send and expires `ttl` s later by ITS clock, which
    # runs at (1 + rate × margin) holder seconds' worth per second: in the holder's time, the
    # lease ends at sent_at + delay + ttl / (1 + rate × margin).
    store_rate = 1 + rate * margin
    expires = sent_at + delay + ttl / store_rate
    assert holder_deadline(sent_at, ttl, margin) < expires


def test_timing_that_leaves_no_room_for_a_renewal_is_refused() -> None:
    check_timing(ttl_s=30, renew_every_s=10, margin=0.1)
    with pytest.raises(ValueError, match="renew_every_s"):
        check_timing(ttl_s=30, renew_every_s=27, margin=0.1)
    with pytest.raises(ValueError, match="margin"):
        check_timing(ttl_s=30, renew_every_s=10, margin=0.5)
    with pytest.raises(ValueError, match="ttl_s"):
        check_timing(ttl_s=0, renew_every_s=10, margin=0.1)
