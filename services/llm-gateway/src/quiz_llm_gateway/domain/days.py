"""The budget day: a calendar day in Europe/Zurich, DST-correct through tzdata."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

ZURICH = ZoneInfo("Europe/Zurich")


def budget_day(instant: datetime, tz: ZoneInfo = ZURICH) -> date:
    """The Zurich calendar day an aware instant falls on."""
    if instant.tzinfo is None:
        raise ValueError("budget_day needs an aware datetime")
    return instant.astimezone(tz).date()


def day_bounds(day: date, tz: ZoneInfo = ZURICH) -> tuple[datetime, datetime]:
    """The UTC instants where a Zurich day starts and ends (23 or 25 hours on DST days)."""
    start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
    nxt = day + timedelta(days=1)
    end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).astimezone(UTC)
    return start, end


def seconds_until_next_day(instant: datetime, tz: ZoneInfo = ZURICH) -> float:
    """Seconds from an instant to the next Zurich midnight: when a spent cap resets."""
    _, end = day_bounds(budget_day(instant, tz), tz)
    return (end - instant.astimezone(UTC)).total_seconds()
