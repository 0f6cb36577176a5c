"""The per-person token bucket (GCRA), as pure arithmetic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quiz_lesson_fix.domain.ratelimit import admit


def run(times: list[float], limit: int, window: float) -> list[bool]:
    tat: float | None = None
    admitted = []
    for now in times:
        decision = admit(tat, now, limit, window)
        tat = decision.tat
        admitted.append(decision.allowed)
    return admitted


def test_a_full_bucket_lets_limit_through_then_one_per_interval() -> None:
    assert run([0.0] * 11, 10, 60) == [True] * 10 + [False]
    first = admit(None, 0.0, 10, 60)
    assert (first.allowed, first.remaining) == (True, 9)
    tat = 0.0
    for _ in range(10):
        tat = admit(tat, 0.0, 10, 60).tat
    refused = admit(tat, 0.0, 10, 60)
    assert (refused.allowed, refused.retry_after_s) == (False, 6.0)
    assert admit(tat, 6.0, 10, 60).allowed  # exactly when it said
    assert not admit(tat, 5.9, 10, 60).allowed


def test_no_limit_admits_everything() -> None:
    assert run([0.0] * 100, 0, 60) == [True] * 100


@given(
    gaps=st.lists(st.floats(min_value=0, max_value=30), min_size=1, max_size=60),
    limit=st.integers(min_value=1, max_value=10),
)
def test_never_more_than_the_burst_plus_the_refill(gaps: list[float], limit: int) -> None:
    window = 60.0
    times, now = [], 0.0
    for gap in gaps:
        now += gap
        times.append(now)
    admitted = [t for t, ok in zip(times, run(times, limit, window), strict=True) if ok]
    interval = window / limit
    for i, start in enumerate(admitted):
        for j in range(i, len(admitted)):
            span = admitted[j] - start
            assert j - i + 1 <= limit + span / interval + 1e-6


@given(limit=st.integers(min_value=1, max_value=20), n=st.integers(min_value=1, max_value=50))
def test_a_steady_stream_at_the_rate_is_always_admitted(limit: int, n: int) -> None:
    interval = 60.0 / limit
    assert all(run([i * interval for i in range(n)], limit, 60.0))
