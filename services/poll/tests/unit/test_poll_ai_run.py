"""The lease of `poll_ai_runs` and the run's cap and failures (ADR-072 §12–§13; FACTS D "Batches").

After heig-quiz `apps/api/src/modules/poll/ai.ts` (the claim's condition: lease null or its
heartbeat over 60 s old, and no error or an error over 30 s old; the job 3 s later; 200 calls)
and its db test ("makes no call while another pass holds the lease, nor past the run's limit").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_contracts.poll import PollAiError, PollAiRun
from quiz_poll.domain import ai_run
from quiz_poll.domain.ai_run import (
    RUN_CAP,
    after_failure,
    after_success,
    before_call,
    board_error,
    claim,
    heartbeat,
    holds,
    pass_running,
    pause,
    release,
    switch_off,
    switch_on,
)

T0 = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def test_a_poll_without_a_row_is_claimed_and_its_job_is_due_three_seconds_later() -> None:
    got = claim(None, "ev1", T0)
    assert got is not None
    assert got.run.lease_at == T0 and got.run.heartbeat_at == T0
    assert got.job_at == T0 + 3 * S
    assert holds(got.run, got.lease)


def test_a_held_lease_is_not_claimed_until_its_heartbeat_is_over_sixty_seconds_old() -> None:
    first = claim(None, "ev1", T0)
    assert first is not None
    held = heartbeat(first.run, T0 + 30 * S)
    assert claim(held, "ev1", T0 + 89 * S) is None
    assert claim(held, "ev1", T0 + 90 * S) is None  # exactly 60 s: still the live pass's
    again = claim(held, "ev1", T0 + 91 * S)
    assert again is not None and again.lease == T0 + 91 * S
    assert not holds(again.run, first.lease)  # the silent pass has lost it


def test_a_failure_cools_down_for_thirty_seconds_then_the_next_answer_tries_again() -> None:
    got = claim(None, "ev1", T0)
    assert got is not None
    failed = after_failure(got.run, ErrorCode.llm_budget_exhausted, T0 + 4 * S)
    assert failed.lease_at is None
    assert failed.error == PollAiError.budget_exhausted
    assert claim(failed, "ev1", T0 + 20 * S) is None
    assert claim(failed, "ev1", T0 + 34 * S) is None
    assert claim(failed, "ev1", T0 + 35 * S) is not None


def test_a_success_counts_the_call_and_clears_the_failure() -> None:
    run = PollAiRun(evaluation_id="ev1", calls=3, error=PollAiError.timeout, error_at=T0)
    done = after_success(run, T0 + S)
    assert (done.calls, done.error, done.error_at, done.heartbeat_at) == (4, None, None, T0 + S)


def test_the_run_stops_at_two_hundred_calls() -> None:
    run = PollAiRun(evaluation_id="ev1", calls=RUN_CAP - 1, lease_at=T0, heartbeat_at=T0)
    assert before_call(run, T0) is None
    run = after_success(run, T0)
    capped = before_call(run, T0 + S)
    assert capped is not None
    assert (capped.error, capped.lease_at) == (PollAiError.run_cap, None)
    assert claim(capped, "ev1", T0 + 10 * 60 * S) is None  # capped: not claimed again


def test_switching_on_starts_a_fresh_run_and_off_drops_the_lease() -> None:
    capped = PollAiRun(
        evaluation_id="ev1", calls=RUN_CAP, error=PollAiError.run_cap, error_at=T0, lease_at=T0
    )
    fresh = switch_on(capped, "ev1", T0 + S)
    assert (fresh.calls, fresh.error, fresh.lease_at) == (0, None, None)
    assert claim(fresh, "ev1", T0 + 2 * S) is not None
    held = claim(None, "ev1", T0)
    assert held is not None
    assert switch_off(held.run, T0 + S).lease_at is None
    assert release(held.run, T0 + S).lease_at is None


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        (ErrorCode.llm_not_configured, PollAiError.not_configured),
        (ErrorCode.llm_budget_exhausted, PollAiError.budget_exhausted),
        (ErrorCode.rate_limited, PollAiError.rate_limited),
        (ErrorCode.timeout, PollAiError.timeout),
        (ErrorCode.llm_failed, PollAiError.provider_error),
        (ErrorCode.unavailable, PollAiError.provider_error),
        ("something new", PollAiError.provider_error),
        (PollAiError.run_cap, PollAiError.run_cap),
    ],
)
def test_failures_show_on_the_board_in_the_platforms_words(code: str, shown: PollAiError) -> None:
    assert board_error(code) == shown


def test_the_constants_are_the_adrs() -> None:
    assert ai_run.LEASE_STALE == 60 * S
    assert ai_run.ERROR_COOLDOWN == 30 * S
    assert ai_run.JOB_DELAY == 3 * S
    assert RUN_CAP == 200


def test_a_pass_runs_while_its_lease_is_held_and_its_heartbeat_is_fresh() -> None:
    """A job delivered again waits while its first delivery's pass beats (issue 20: two passes
    under one lease paid ideas twice); a dead or paused pass, or another lease, does not hold
    it back."""
    lease, now = 1000.0, 2000.0
    assert pass_running(lease, now - 11, lease, now)  # beat 11 s ago: alive
    assert not pass_running(lease, now - 13, lease, now)  # 13 s: its replica died
    assert not pass_running(lease, None, lease, now)  # paused for its redelivery
    assert not pass_running(lease + 1, now, lease, now)  # another lease: not this job's pass
    assert not pass_running(None, now, lease, now)  # released
    assert not pass_running(now - 3, now - 3, now - 3, now)  # claimed, no pass has beaten yet


def test_a_paused_pass_keeps_its_lease_and_no_longer_holds_its_job_back() -> None:
    """A pass stopped for its job to come again (a call the gateway did not answer) clears its
    heartbeat: the redelivery starts at once, under the same lease."""
    got = claim(None, "ev1", T0)
    assert got is not None
    beating = heartbeat(got.run, T0 + 5 * S)
    paused = pause(beating)
    assert holds(paused, got.lease) and paused.heartbeat_at is None
    lease, now = T0.timestamp(), (T0 + 6 * S).timestamp()
    assert pass_running(lease, (T0 + 5 * S).timestamp(), lease, now)
    assert not pass_running(lease, None, lease, now)
