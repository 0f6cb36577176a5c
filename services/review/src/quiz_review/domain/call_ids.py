"""The request id of each review call, derived from the work it does (issue 20, item 3).

The gateway answers an id it has seen from its stored reply, so a redelivered request, a
retried call or a second replica doing the same work pays once:

- a review request (`review.v1.requests`): `review-request:<version_id>:<request's requestId>`
  — the request and the version it reviews (a redelivery, or a retry after the gateway was
  unreachable, is the same call);
- the night: `review-night:<version_id>:<Zurich day>` — one paid call per version per night;
- Review now: `review-now:<version_id>:<caller key>` — the person's HTTP request
  (`quiz_servicekit.request_ids.caller_key`: their Idempotency-Key, else who, route and body)
  on the version it reviews.

Each id fixes the call's content too (the prompt is a function of the version), so the same id
never comes with another request (which the gateway would refuse as `invalid_request`).
"""

from __future__ import annotations

from quiz_servicekit.request_ids import bounded_id


def request_call_id(version_id: str, request_id: str | None) -> str:
    """The call of a review request on `version_id` (`request_id`: the request's requestId)."""
    return bounded_id("review-request", version_id, request_id or "")


def night_call_id(version_id: str, day: str) -> str:
    """The night's call on `version_id` on the Zurich `day` (ISO date)."""
    return bounded_id("review-night", version_id, day)


def now_call_id(version_id: str, caller: str) -> str:
    """Review now of `version_id` by the HTTP request `caller` names (its caller key)."""
    return bounded_id("review-now", version_id, caller)
