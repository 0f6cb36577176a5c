"""Sliding-window arithmetic and the circuit breaker's state machine."""

from __future__ import annotations

import pytest

from quiz_llm_gateway.domain.circuit import CircuitBreaker, CircuitState
from quiz_llm_gateway.domain.ratelimit import decide


def test_ten_pass_the_eleventh_waits_for_the_oldest() -> None:
    events: list[float] = []
    for i in range(10):
        now = 100.0 + i
        assert decide(events, 10, now, 60).allowed
        events.append(now)
    refused = decide(events, 10, 115.0, 60)
    assert not refused.allowed
    # The oldest (t=100) leaves the window (t-60, t] at t=160: 45 s from 115.
    assert refused.retry_after_s == pytest.approx(45.0)
    assert not decide(events, 10, 159.999, 60).allowed
    assert decide(events, 10, 160.0, 60).allowed


def test_limit_holds_with_more_events_than_the_limit() -> None:
    events = [0.0, 1.0, 2.0, 3.0]
    decision = decide(events, 2, 10.0, 60)
    # Two must leave before one fits: the third oldest (t=2) at t=62.
    assert not decision.allowed
    assert decision.retry_after_s == pytest.approx(52.0)


def test_circuit_opens_after_threshold_and_probes_once() -> None:
    breaker = CircuitBreaker(failure_threshold=3, cooldown_s=10)
    for _ in range(2):
        breaker.record_failure(0.0)
        assert breaker.current(0.0) is CircuitState.closed
    breaker.record_failure(1.0)
    assert breaker.current(1.0) is CircuitState.open
    assert not breaker.allow(5.0)
    assert breaker.retry_after(5.0) == pytest.approx(6.0)
    assert breaker.current(11.0) is CircuitState.half_open
    assert breaker.allow(11.0)
    assert not breaker.allow(11.0), "one probe at a time"
    breaker.record_failure(11.5)
    assert breaker.current(11.5) is CircuitState.open
    assert breaker.allow(22.0)
    breaker.record_success()
    assert breaker.current(22.0) is CircuitState.closed
    assert breaker.failures == 0


def test_success_resets_the_count() -> None:
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=10)
    breaker.record_failure(0)
    breaker.record_success()
    breaker.record_failure(0)
    assert breaker.current(0) is CircuitState.closed


def test_retry_after_header_is_clamped() -> None:
    from quiz_llm_gateway.call.provider import RETRY_AFTER_MAX_S, parse_retry_after

    assert parse_retry_after("nan") is None
    assert parse_retry_after("inf") is None
    assert parse_retry_after("-inf") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("99999") == RETRY_AFTER_MAX_S
    assert parse_retry_after(None) is None


def test_lone_surrogates_are_replaced() -> None:
    from quiz_llm_gateway.call.provider import sanitize

    assert sanitize({"a\ud800": ["\udfff", 1, "ok \U0001f600"]}) == {
        "a\ufffd": ["\ufffd", 1, "ok \U0001f600"]
    }
