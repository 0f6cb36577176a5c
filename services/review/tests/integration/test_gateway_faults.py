"""A review whose gateway call meets a transport fault ends reviewed, paid once (issue 20).

A gateway that cannot be reached, or whose reply is lost in a NATS restart, is not the
model's answer: the version is never stored `failed` for it. The request is retried with the
same request id (by LlmClient within the call's wait, by redelivery after that), and the
gateway answers a call it already made from its stored reply: one ledger row per request id.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys

from .conftest import Review, eventually, finding, open_bus, running_review
from .test_requests import completed_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def ledger(gateway_dir: Path, request_id: str) -> list[tuple[str, str]]:
    """The gateway's ledger rows (outcome, error code) of `request_id`."""
    with sqlite3.connect(gateway_dir / "gateway.db") as db:
        return db.execute(
            "SELECT outcome, COALESCE(error_code, '') FROM llm_ledger WHERE request_id = ?",
            (request_id,),
        ).fetchall()


async def request_review(review: Review, event: dict[str, Any], request_id: str) -> None:
    request = {
        "questionId": event["questionId"],
        "versionId": event["versionId"],
        "requestId": request_id,
    }
    await review.publish("review.v1.requests", request, f"rr:{event['versionId']}")


async def reviewed_state(review: Review, version_id: str) -> str | None:
    row = await review.service.repo.review_of(version_id)
    return None if row is None else row.state.value


async def test_a_gateway_down_during_a_review_is_retried_not_failed(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    """No gateway answers when the request comes (every replica restarting): before issue 20
    the version was stored `failed` at once and nothing retried it."""
    with open_bus(stub, tmp_path) as bus:
        bus.gateway.stop()
        async with running_review(
            bus.url, signing_keys, f"sqlite:///{tmp_path / 'r.db'}", llm_deadline_s=10.0
        ) as review:
            event = await review.publish_version(pool_id="pool-down")
            stub.script(StubReply.tool({"findings": [finding("prompt", "notice", "Typo.")]}))
            rid = f"down-{uuid.uuid4().hex[:6]}"
            await request_review(review, event, rid)
            await asyncio.sleep(2)  # delivered, the gateway still unreachable
            assert await reviewed_state(review, event["versionId"]) is None
            bus.gateway.start()

            async def reviewed() -> bool:
                return await reviewed_state(review, event["versionId"]) is not None

            await eventually(reviewed, "the review once the gateway is back", timeout_s=60)
            assert await reviewed_state(review, event["versionId"]) == "findings"
            events = await completed_events(review.nats_url, rid)
            assert [e["review"]["state"] for e in events] == ["findings"]
            call_id = f"review-request:{event['versionId']}:{rid}"
            assert ledger(tmp_path / "gateway", call_id) == [("ok", "")]
            assert len(stub.requests) == 1


async def test_a_nats_restart_mid_review_ends_reviewed_and_paid_once(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    """The issue's fault: NATS restarts while the model answers; the gateway's reply after the
    reconnect is lost. Before issue 20 the review waited its whole deadline and stored
    `failed`; now the call is asked again with its request id and answered from the call the
    gateway made: one provider request, one ledger row, the version reviewed."""
    with open_bus(stub, tmp_path) as bus:
        async with running_review(
            bus.url, signing_keys, f"sqlite:///{tmp_path / 'r.db'}", llm_deadline_s=10.0
        ) as review:
            event = await review.publish_version(pool_id="pool-restart")
            reply = StubReply.tool({"findings": [finding("prompt", "notice", "Typo.")]})
            stub.script(StubReply.slow(3, reply), reply)
            rid = f"restart-{uuid.uuid4().hex[:6]}"
            await request_review(review, event, rid)

            async def model_called() -> bool:
                return len(stub.requests) >= 1

            await eventually(model_called, "the model call")
            bus.nats.stop()
            bus.nats.start()

            async def reviewed() -> bool:
                return await reviewed_state(review, event["versionId"]) is not None

            await eventually(reviewed, "the review after the restart", timeout_s=60)
            assert await reviewed_state(review, event["versionId"]) == "findings"
            call_id = f"review-request:{event['versionId']}:{rid}"

            async def settled() -> bool:
                return len(ledger(tmp_path / "gateway", call_id)) >= 1

            await eventually(settled, "the call's ledger row")
            assert ledger(tmp_path / "gateway", call_id) == [("ok", "")]
            assert len(stub.requests) == 1


async def test_the_last_delivery_answers_a_retryable_error_and_stores_nothing(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    """Still no gateway on the request's last delivery: the requester is told `llm_failed`
    with a `retry_after_s`, and no `failed` row is stored (the version stays unreviewed, a
    candidate for the night or a new request)."""
    with open_bus(stub, tmp_path) as bus:
        bus.gateway.stop()
        async with running_review(
            bus.url,
            signing_keys,
            f"sqlite:///{tmp_path / 'r.db'}",
            llm_deadline_s=10.0,
            request_max_deliver=1,
        ) as review:
            event = await review.publish_version(pool_id="pool-last")
            rid = f"last-{uuid.uuid4().hex[:6]}"
            await request_review(review, event, rid)

            async def answered() -> bool:
                return len(await completed_events(review.nats_url, rid)) == 1

            await eventually(answered, "the request's answer", timeout_s=30)
            (completed,) = await completed_events(review.nats_url, rid)
            assert completed["error"]["code"] == "llm_failed"
            assert completed["error"]["retry_after_s"] > 0
            assert await reviewed_state(review, event["versionId"]) is None
            assert stub.requests == []
