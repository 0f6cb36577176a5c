"""The night (ADR-060 §5): when it works, what it reviews, and when it stops spending.

Script of one hourly run of the task (the lease, the queries and the calls are the wiring's):

    if not is_review_night(now): return                       # 1 <= Zurich hour < 6
    share = night_share_usd(cap_usd, LLM_REVIEW_NIGHT_SHARE)
    for version in night_candidates(latest_versions, opted_in_pools, now, limit):
        call = prompt.review_request(version..., user=None)
        spent = <today's no-person review cost, in-flight calls at their worst case>
        worst = <the platform's worst case of `call`, by the gateway's prices>
        if not share_allows(spent, worst, share): stop         # never the gateway's refusal
        try: <llm.v1.complete(call)> → store clean/findings
        except code: if night_stops_on(code): stop; else store failed and go on

Today and midnight are Europe/Zurich, like the gateway's budget day. The worst case is NOT
computed here: it is the platform's formula (FACTS E: ceil(promptChars / 3) input tokens +
4000 output tokens) at the gateway's prices, which the gateway computes from the prompt size
counted here (`prompt.platform_prompt_chars`; see `share_allows`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time
from decimal import Decimal
from typing import Final
from zoneinfo import ZoneInfo

from quiz_contracts.errors import ErrorCode
from quiz_contracts.review import ReviewState
from quiz_review.domain.states import is_reviewable

ZURICH: Final = ZoneInfo("Europe/Zurich")
NIGHT_FROM_HOUR: Final = 1  # included
NIGHT_TO_HOUR: Final = 6  # excluded
# Versions looked at per hourly run (HQ review.ts NIGHT_BATCH): a run never holds a worker long.
NIGHT_BATCH: Final = 60
# ADR-060 §5: the night spends at most this share of the day's cap (LLM_REVIEW_NIGHT_SHARE).
DEFAULT_NIGHT_SHARE: Final = Decimal("0.25")

# No key, or the cap itself: nothing more can be done tonight. Any other failure marks the
# version failed (retried the next night) and the night goes on.
_STOPPING_CODES: Final = frozenset({ErrorCode.llm_not_configured, ErrorCode.llm_budget_exhausted})


def is_review_night(at: datetime) -> bool:
    """Whether `at` (timezone-aware) falls between 01:00 included and 06:00 excluded in Zurich.

    The hour is read on the Zurich wall clock at that instant, so both DST nights are right:
    the spring night is four hours long, the autumn one six (02:00–03:00 happens twice).
    """
    hour = _require_aware(at).astimezone(ZURICH).hour
    return NIGHT_FROM_HOUR <= hour < NIGHT_TO_HOUR


def zurich_midnight(at: datetime) -> datetime:
    """The start of `at`'s day in Zurich, as a UTC instant (Zurich midnight always exists)."""
    day = _require_aware(at).astimezone(ZURICH).date()
    return datetime.combine(day, time(0), tzinfo=ZURICH).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class VersionRow:
    """A published version as the read model holds it, with its review row's state if any."""

    question_id: str
    pool_id: str
    version_id: str
    version_number: int
    type: str
    published_at: datetime
    live: bool
    review_state: ReviewState | None = None
    reviewed_at: datetime | None = None


def wants_review(row: VersionRow, midnight: datetime) -> bool:
    """No review row, or a failed one from before today's Zurich midnight."""
    if row.review_state is None:
        return True
    return (
        row.review_state is ReviewState.failed
        and row.reviewed_at is not None
        and row.reviewed_at < midnight
    )


def night_candidates(
    versions: Iterable[VersionRow],
    opted_in_pools: Collection[str],
    now: datetime,
    limit: int = NIGHT_BATCH,
) -> list[VersionRow]:
    """What tonight's run reviews, in order (HQ reviewStore.ts nightCandidates, FACTS E).

    The LATEST published version (highest number) of each live question of an opted-in pool,
    of a reviewable type, that wants a review; newest `published_at` first (ties by version id,
    so the order is total); at most `limit`. Latest is chosen BEFORE the other filters: an
    older version without a row is never a candidate when the latest has one.
    """
    latest: dict[str, VersionRow] = {}
    for row in versions:
        held = latest.get(row.question_id)
        if held is None or row.version_number > held.version_number:
            latest[row.question_id] = row
    midnight = zurich_midnight(now)
    chosen = [
        row
        for row in latest.values()
        if row.live
        and row.pool_id in opted_in_pools
        and is_reviewable(row.type)
        and wants_review(row, midnight)
    ]
    chosen.sort(key=lambda row: row.version_id)
    chosen.sort(key=lambda row: row.published_at, reverse=True)
    return chosen[: max(limit, 0)]


def night_share_usd(cap_usd: Decimal, share: Decimal = DEFAULT_NIGHT_SHARE) -> Decimal:
    """The most the night may spend today: share × the day's cap, exact (no rounding)."""
    if not Decimal(0) <= share <= Decimal(1):
        raise ValueError(f"the night's share must lie in [0, 1], not {share}")
    return cap_usd * share


def share_allows(spent_usd: Decimal, worst_case_next_usd: Decimal, share_usd: Decimal) -> bool:
    """Whether the next call may start: `spent + worst_case(next) <= share` (equality allowed).

    `spent_usd`: today's review calls made by no person, in-flight ones at their worst case.
    `worst_case_next_usd`: the most the next call can cost as the platform counts it (FACTS E)
    at the GATEWAY's prices — asked of the gateway, never priced a second way here.
    Exact decimals in, no float anywhere.
    """
    return spent_usd + worst_case_next_usd <= share_usd


def night_stops_on(code: ErrorCode | str) -> bool:
    """Whether a failed call ends the night (no key, cap spent) rather than marking `failed`."""
    try:
        return ErrorCode(code) in _STOPPING_CODES
    except ValueError:
        return False


def _require_aware(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("a naive datetime has no instant: give its timezone")
    return at
