"""Review's request ids: one per piece of work, the same on every redelivery or retry."""

from __future__ import annotations

from quiz_review.domain.call_ids import night_call_id, now_call_id, request_call_id


def test_a_request_is_named_by_its_version_and_its_request_id() -> None:
    assert request_call_id("v-1", "batch-42") == "review-request:v-1:batch-42"
    assert request_call_id("v-1", "batch-42") == request_call_id("v-1", "batch-42")
    assert len({request_call_id("v-1", "a"), request_call_id("v-2", "a")}) == 2
    assert request_call_id("v-1", None) == "review-request:v-1:"


def test_the_night_pays_once_per_version_and_day() -> None:
    assert night_call_id("v-1", "2026-07-01") == "review-night:v-1:2026-07-01"
    assert night_call_id("v-1", "2026-07-01") != night_call_id("v-1", "2026-07-02")


def test_review_now_is_the_callers_request_on_a_version() -> None:
    assert now_call_id("v-1", "req:abc") == "review-now:v-1:req:abc"
    # A new version of the question under the same HTTP request is another call.
    assert now_call_id("v-1", "req:abc") != now_call_id("v-2", "req:abc")


def test_every_id_fits_the_contract() -> None:
    long = "x" * 300
    for made in (request_call_id(long, long), night_call_id(long, "d"), now_call_id("v", long)):
        assert len(made) <= 200 and made.startswith("review-")
