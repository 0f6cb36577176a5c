"""The slice arithmetic (domain/slices.py): sizing, and holds that never outgrow their slice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quiz_llm_gateway.domain.slices import CapSlice, SliceSizing


def test_size_is_calls_worst_cases_within_a_share_of_what_remains() -> None:
    sizing = SliceSizing(calls=16, share=4, min_calls=2)
    assert sizing.size(1_000_000, 1_000) == 16_000  # 16 worst cases
    assert sizing.size(40_000, 1_000) == 10_000  # a quarter of what remains
    assert sizing.size(8_000, 1_000) == 2_000  # two worst cases: still worth it
    assert sizing.size(7_999, 1_000) == 0  # less: the call is admitted on its own
    assert sizing.size(0, 1_000) == 0
    assert SliceSizing(calls=0).size(1_000_000, 1_000) == 0  # slices off


@given(
    remaining=st.integers(min_value=-10, max_value=10**9),
    worst=st.integers(min_value=0, max_value=10**6),
    calls=st.integers(min_value=0, max_value=64),
    share=st.integers(min_value=1, max_value=8),
    min_calls=st.integers(min_value=1, max_value=8),
)
def test_a_slice_never_takes_more_than_remains(
    remaining: int, worst: int, calls: int, share: int, min_calls: int
) -> None:
    size = SliceSizing(calls, share, min_calls).size(remaining, worst)
    assert size >= 0
    if size:
        assert size <= remaining // share <= remaining
        assert size <= calls * worst
        assert size >= min_calls * worst  # a slice always covers the call that asked


# One step of a replica's life with its slice: take a hold, settle one (at a cost up to its
# hold), drop one, expire, grow, give back.
step = st.one_of(
    st.tuples(st.just("take"), st.integers(0, 5_000), st.floats(0, 400)),
    st.tuples(st.just("settle"), st.integers(0, 40), st.floats(0, 1)),
    st.tuples(st.just("drop"), st.integers(0, 40), st.just(0.0)),
    st.tuples(st.just("expire"), st.just(0), st.floats(0, 60)),
    st.tuples(st.just("grow"), st.integers(0, 20_000), st.floats(0, 400)),
    st.tuples(st.just("give_back"), st.just(0), st.just(0.0)),
)


@settings(max_examples=300)
@given(leased=st.integers(0, 50_000), steps=st.lists(step, max_size=80))
def test_holds_never_exceed_the_slice_and_every_micro_dollar_is_accounted(
    leased: int, steps: list[tuple[str, int, float]]
) -> None:
    """Whatever the interleaving of admissions, settles, expiries, growth and returns:
    0 <= held <= amount (the holds never outgrow what the database reserved), and
    leased = amount + spent + given back (nothing appears or vanishes)."""
    now = 0.0
    s = CapSlice("lease", leased, expires_at=300.0, last_used=now)
    total_leased, spent, given_back = leased, 0, 0
    made = 0
    for kind, value, when in steps:
        now += 1.0
        if kind == "take":
            hold_id = f"h{made}"
            made += 1
            expires = now + when
            if s.fits(value, expires):
                s.take(hold_id, value, expires, now)
            else:
                try:
                    s.take(hold_id, value, expires, now)
                    raise AssertionError("a hold that does not fit was taken")
                except ValueError:
                    pass
        elif kind == "settle":
            hold = s.holds.get(f"h{value}")
            # A call never costs more than its worst case; the slice takes off at most that.
            cost = int(hold.amount_micros * when) if hold else 5
            spent += s.settle(f"h{value}", cost, now)
        elif kind == "drop":
            s.drop(f"h{value}")
        elif kind == "expire":
            s.expire(now + when)
        elif kind == "grow":
            s.grow(value, now + when)
            total_leased += value
        else:
            given_back += s.give_back()
            assert s.free_micros == 0
        assert 0 <= s.held_micros <= s.amount_micros
        assert total_leased == s.amount_micros + spent + given_back


def test_a_hold_must_not_outlive_its_slice() -> None:
    s = CapSlice("lease", 10_000, expires_at=100.0, last_used=0.0)
    assert s.fits(1_000, 100.0)
    assert not s.fits(1_000, 100.5)  # the replica renews the lease first
    assert not s.fits(10_001, 50.0)


def test_idle_only_without_holds_for_idle_s() -> None:
    s = CapSlice("lease", 10_000, expires_at=100.0, last_used=0.0)
    s.take("a", 1_000, 50.0, now=1.0)
    assert not s.idle(10.0, 2.0)  # a call in flight
    assert s.settle("a", 400, now=3.0) == 400
    assert s.amount_micros == 9_600 and s.free_micros == 9_600
    assert not s.idle(4.0, 2.0) and s.idle(5.0, 2.0)
