"""The night (ADR-060 §5): the Zurich window, the candidates, the share of the cap.

Instants are written in UTC by hand (not converted with the code's own zone logic), with the
Zurich wall clock they stand for in the comment. 2026's DST nights in Europe/Zurich: spring on
29 March (02:00 CET → 03:00 CEST), autumn on 25 October (03:00 CEST → 02:00 CET).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_contracts.review import ReviewState
from quiz_review.domain.night import (
    VersionRow,
    is_review_night,
    night_candidates,
    night_share_usd,
    night_stops_on,
    share_allows,
    zurich_midnight,
)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (UTC instant, Zurich wall clock, in the night?)
WINDOW = [
    # A normal winter night (CET, UTC+1).
    ("2026-01-14T23:59", "00:59 CET", False),
    ("2026-01-15T00:00", "01:00 CET", True),
    ("2026-01-15T04:59", "05:59 CET", True),
    ("2026-01-15T05:00", "06:00 CET", False),
    # A normal summer night (CEST, UTC+2).
    ("2026-06-30T22:59", "00:59 CEST", False),
    ("2026-06-30T23:00", "01:00 CEST", True),
    ("2026-07-01T03:59", "05:59 CEST", True),
    ("2026-07-01T04:00", "06:00 CEST", False),
    # Spring DST night: starts in CET, ends in CEST; 02:00–03:00 does not exist.
    ("2026-03-28T23:59", "00:59 CET", False),
    ("2026-03-29T00:00", "01:00 CET", True),
    ("2026-03-29T00:59", "01:59 CET", True),
    ("2026-03-29T01:00", "03:00 CEST", True),
    ("2026-03-29T03:59", "05:59 CEST", True),
    ("2026-03-29T04:00", "06:00 CEST", False),
    # Autumn DST night: starts in CEST, ends in CET; 02:00–03:00 happens twice.
    ("2026-10-24T22:59", "00:59 CEST", False),
    ("2026-10-24T23:00", "01:00 CEST", True),
    ("2026-10-25T00:30", "02:30 CEST", True),
    ("2026-10-25T01:30", "02:30 CET", True),
    ("2026-10-25T04:59", "05:59 CET", True),
    ("2026-10-25T05:00", "06:00 CET", False),
    # Midday, and the minute before midnight.
    ("2026-07-01T10:00", "12:00 CEST", False),
    ("2026-07-01T21:59", "23:59 CEST", False),
]


@pytest.mark.parametrize(("instant", "zurich", "inside"), WINDOW)
def test_the_night_is_one_to_six_on_the_zurich_clock(
    instant: str, zurich: str, inside: bool
) -> None:
    assert is_review_night(utc(instant)) is inside, zurich


@pytest.mark.parametrize(("evening", "hours"), [("2026-03-28T20:00", 4), ("2026-10-24T20:00", 6)])
def test_dst_nights_last_four_and_six_hours(evening: str, hours: int) -> None:
    start = utc(evening)
    minutes = sum(is_review_night(start + timedelta(minutes=m)) for m in range(12 * 60))
    assert minutes == hours * 60


def test_any_zone_is_read_as_its_instant_and_a_naive_time_is_refused() -> None:
    # 01:30 in Zurich written as 19:30 the evening before in New York (EST, UTC-5), in winter.
    assert is_review_night(datetime(2026, 1, 14, 19, 30, tzinfo=timezone(timedelta(hours=-5))))
    with pytest.raises(ValueError):
        is_review_night(datetime(2026, 1, 15, 2, 0))


@pytest.mark.parametrize(
    ("instant", "midnight"),
    [
        ("2026-07-02T00:30", "2026-07-01T22:00"),  # summer: midnight is 22:00 UTC
        ("2026-01-15T03:00", "2026-01-14T23:00"),  # winter: 23:00 UTC
        ("2026-03-29T03:00", "2026-03-28T23:00"),  # spring DST day began in CET
        ("2026-10-25T04:00", "2026-10-24T22:00"),  # autumn DST day began in CEST
        ("2026-07-01T21:59", "2026-06-30T22:00"),  # 23:59 Zurich: still that day
        ("2026-07-01T22:00", "2026-07-01T22:00"),  # 00:00 Zurich: a new day
    ],
)
def test_zurich_midnight(instant: str, midnight: str) -> None:
    assert zurich_midnight(utc(instant)) == utc(midnight)


# 02:30 in Zurich on 2 July 2026: today's midnight is 2026-07-01T22:00Z.
NOW = utc("2026-07-02T00:30")
POOLS = {"pool-a", "pool-b"}


def row(
    question: str,
    number: int = 1,
    *,
    published: str = "2026-06-01T10:00",
    pool: str = "pool-a",
    type_name: str = "mcq",
    live: bool = True,
    state: ReviewState | None = None,
    reviewed: str | None = None,
) -> VersionRow:
    return VersionRow(
        question_id=question,
        pool_id=pool,
        version_id=f"{question}-v{number}",
        version_number=number,
        type=type_name,
        published_at=utc(published),
        live=live,
        review_state=state,
        reviewed_at=utc(reviewed) if reviewed else None,
    )


def ids(rows: list[VersionRow]) -> list[str]:
    return [r.version_id for r in rows]


def test_candidates_are_the_latest_versions_newest_published_first() -> None:
    versions = [
        row("old", published="2026-01-01T08:00"),
        row("new", published="2026-06-30T08:00"),
        row("mid", published="2026-03-01T08:00"),
        row("tie-b", published="2026-03-01T08:00"),
        # v1 has no row, but the latest (v2) is reviewed: not a candidate.
        row("re", 1, published="2026-02-01T08:00"),
        row(
            "re",
            2,
            published="2026-05-01T08:00",
            state=ReviewState.clean,
            reviewed="2026-05-02T01:00",
        ),
        # v3 is the latest and has no row even though v2 was reviewed.
        row("three", 2, published="2026-04-01T08:00", state=ReviewState.findings),
        row("three", 3, published="2026-04-02T08:00"),
    ]
    assert ids(night_candidates(versions, POOLS, NOW)) == [
        "new-v1",
        "three-v3",
        "mid-v1",  # same instant as tie-b: ordered by version id
        "tie-b-v1",
        "old-v1",
    ]


def test_only_live_reviewable_questions_of_opted_in_pools() -> None:
    versions = [
        row("in"),
        row("other-pool", pool="pool-z"),
        row("retired", live=False),
        row("circuit", type_name="circuit"),
        row("diagram", type_name="diagram"),
        row("clean", state=ReviewState.clean, reviewed="2026-06-01T01:00"),
        row("findings", state=ReviewState.findings, reviewed="2026-06-01T01:00"),
        row("ignored", state=ReviewState.ignored, reviewed="2026-06-01T01:00"),
        row("code", type_name="code", pool="pool-b"),
    ]
    assert sorted(ids(night_candidates(versions, POOLS, NOW))) == ["code-v1", "in-v1"]
    assert night_candidates(versions, set(), NOW) == []


def test_a_failed_review_is_retried_the_next_night_only() -> None:
    versions = [
        # Failed last night at 03:10 Zurich: before today's midnight, retried.
        row("last-night", state=ReviewState.failed, reviewed="2026-07-01T01:10"),
        # Failed yesterday at 23:59 Zurich: still before midnight, retried.
        row("late", state=ReviewState.failed, reviewed="2026-07-01T21:59"),
        # Failed tonight at 00:00 and 01:10 Zurich: not again tonight.
        row("midnight", state=ReviewState.failed, reviewed="2026-07-01T22:00"),
        row("tonight", state=ReviewState.failed, reviewed="2026-07-01T23:10"),
    ]
    assert sorted(ids(night_candidates(versions, POOLS, NOW))) == ["last-night-v1", "late-v1"]
    # The next night, every one of them is due again.
    tomorrow = NOW + timedelta(days=1)
    assert len(night_candidates(versions, POOLS, tomorrow)) == 4


def test_a_run_is_bounded() -> None:
    versions = [row(f"q{i:03}", published=f"2026-06-01T10:{i % 60:02}") for i in range(150)]
    assert len(night_candidates(versions, POOLS, NOW)) == 60
    assert len(night_candidates(versions, POOLS, NOW, limit=7)) == 7
    assert night_candidates(versions, POOLS, NOW, limit=0) == []


CAP = Decimal("20.00")


def test_the_share_allows_equality_and_stops_one_cent_over() -> None:
    share = night_share_usd(CAP, Decimal("0.25"))
    assert share == Decimal("5.00")
    assert share_allows(Decimal("4.98"), Decimal("0.02"), share)  # lands exactly on the share
    assert not share_allows(Decimal("4.99"), Decimal("0.02"), share)  # one cent over
    assert not share_allows(Decimal("4.98"), Decimal("0.020001"), share)  # one micro-dollar over
    assert share_allows(Decimal("0"), Decimal("0"), night_share_usd(CAP, Decimal("0")))
    assert not share_allows(Decimal("0"), Decimal("0.000001"), night_share_usd(CAP, Decimal(0)))


def test_the_share_is_exact_for_any_cap() -> None:
    # 0.25 × 0.000003 is not a whole micro-dollar: no rounding lets a call past it.
    share = night_share_usd(Decimal("0.000003"))
    assert share == Decimal("0.00000075")
    assert not share_allows(Decimal(0), Decimal("0.000001"), share)
    with pytest.raises(ValueError):
        night_share_usd(CAP, Decimal("1.5"))
    with pytest.raises(ValueError):
        night_share_usd(CAP, Decimal("-0.1"))


def test_no_key_and_the_cap_stop_the_night_other_failures_do_not() -> None:
    assert night_stops_on(ErrorCode.llm_not_configured)
    assert night_stops_on("llm_budget_exhausted")
    for code in ("llm_failed", "rate_limited", "timeout", "invalid_request", "unavailable"):
        assert not night_stops_on(code)
    assert not night_stops_on("key_unreadable_or_unknown")
