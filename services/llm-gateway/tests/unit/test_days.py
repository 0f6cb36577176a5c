"""The budget day is the Zurich calendar day, across DST changes."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from quiz_llm_gateway.domain.days import budget_day, day_bounds, seconds_until_next_day


def test_midnight_in_zurich_not_utc() -> None:
    # 23:30 UTC on a winter day is 00:30 in Zurich (UTC+1): already the next day.
    assert budget_day(datetime(2026, 1, 10, 23, 30, tzinfo=UTC)) == date(2026, 1, 11)
    assert budget_day(datetime(2026, 1, 10, 22, 59, tzinfo=UTC)) == date(2026, 1, 10)
    # Summer: UTC+2, the day turns at 22:00 UTC.
    assert budget_day(datetime(2026, 7, 10, 21, 59, tzinfo=UTC)) == date(2026, 7, 10)
    assert budget_day(datetime(2026, 7, 10, 22, 0, tzinfo=UTC)) == date(2026, 7, 11)


def test_spring_forward_day_has_23_hours() -> None:
    start, end = day_bounds(date(2026, 3, 29))
    assert (end - start).total_seconds() == 23 * 3600
    assert start == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    assert end == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)


def test_fall_back_day_has_25_hours_and_the_boundary_moves() -> None:
    start, end = day_bounds(date(2026, 10, 25))
    assert (end - start).total_seconds() == 25 * 3600
    # The night of the change: before it 22:00 UTC is midnight, after it 23:00 UTC.
    assert budget_day(datetime(2026, 10, 24, 21, 59, tzinfo=UTC)) == date(2026, 10, 24)
    assert budget_day(datetime(2026, 10, 24, 22, 0, tzinfo=UTC)) == date(2026, 10, 25)
    assert budget_day(datetime(2026, 10, 25, 22, 59, tzinfo=UTC)) == date(2026, 10, 25)
    assert budget_day(datetime(2026, 10, 25, 23, 0, tzinfo=UTC)) == date(2026, 10, 26)


def test_seconds_until_reset() -> None:
    assert seconds_until_next_day(datetime(2026, 10, 25, 22, 0, tzinfo=UTC)) == 3600


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError):
        budget_day(datetime(2026, 1, 1, 12, 0))
