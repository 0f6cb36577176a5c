"""JetStream in and out: the question store's events and review requests, at least once.

Same event twice, same request twice → one review; a plain nats-py client (the docs' own
example, run as its own process with no project code) publishes a version and a request; a
review process killed mid-review is redelivered the request and leaves exactly one row."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.processes import ServiceProcess

from .conftest import Bus, Review, eventually, finding

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCS = Path(__file__).parents[4] / "docs" / "review.md"


async def completed_events(nats_url: str, request_id: str) -> list[dict[str, Any]]:
    """Every review.v1.completed event of `request_id` stored on REVIEW_EVENTS so far."""
    nc = await nats_connect(nats_url)
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe("review.v1.completed", durable=None, stream="REVIEW_EVENTS")
        out: list[dict[str, Any]] = []
        while True:
            try:
                msgs = await sub.fetch(50, timeout=0.5)
            except TimeoutError:
                break
            for m in msgs:
                event = json.loads(m.data)
                if event.get("requestId") == request_id:
                    out.append(event)
                await m.ack()
        await sub.unsubscribe()
        return out
    finally:
        await nc.drain()


async def test_same_event_and_same_request_twice_make_one_review(
    review: Review, stub: AnthropicStub
) -> None:
    event = await review.publish_version(pool_id="pool-twice")
    # The same event again: the stream drops it (same Nats-Msg-Id) …
    ack = await review.publish(
        "questions.v1.version.published", event, f"version-published:{event['versionId']}"
    )
    assert ack.duplicate
    # … and a redelivery outside the window (another id) changes nothing in the read model.
    await review.publish("questions.v1.version.published", event, f"again:{uuid.uuid4()}")

    stub.script(StubReply.tool({"findings": [finding("prompt", "notice", "Typo.")]}))
    request_id = f"batch-{uuid.uuid4().hex[:8]}"
    request = {
        "questionId": event["questionId"],
        "versionId": event["versionId"],
        "requestId": request_id,
    }
    first = await review.publish(
        "review.v1.requests", request, f"review-request:{event['versionId']}"
    )
    second = await review.publish(
        "review.v1.requests", request, f"review-request:{event['versionId']}"
    )
    assert not first.duplicate and second.duplicate
    # A second request of the same version under another id: answered with the same review.
    await review.publish("review.v1.requests", request, f"review-request:{uuid.uuid4()}")

    async def two_answers() -> bool:
        return len(await completed_events(review.nats_url, request_id)) >= 2

    await eventually(two_answers, "both requests answered")
    events = await completed_events(review.nats_url, request_id)
    assert len(events) == 2
    assert events[0]["review"] == events[1]["review"]
    assert events[0]["pill"] == {"state": "findings", "count": 1, "worst": "notice"}
    assert events[0]["poolId"] == "pool-twice"
    assert len(stub.requests) == 1
    version = await review.service.repo.version(event["versionId"])
    assert version is not None and version.version_number == 1


async def test_request_errors_are_answered(review_sqlite: Review, stub: AnthropicStub) -> None:
    review = review_sqlite
    circuit = await review.publish_version(type="circuit", config={"configVersion": 1})
    rid = f"err-{uuid.uuid4().hex[:8]}"
    await review.publish(
        "review.v1.requests", {"questionId": circuit["questionId"], "requestId": rid}, rid
    )
    await review.publish(
        "review.v1.requests", {"questionId": "q-nowhere", "requestId": rid}, rid + "-2"
    )

    async def answered() -> bool:
        return len(await completed_events(review.nats_url, rid)) == 2

    await eventually(answered, "both errors")
    codes = sorted(e["error"]["code"] for e in await completed_events(review.nats_url, rid))
    assert codes == ["not_published", "review_unsupported"]
    assert stub.requests == []


async def test_version_deleted_and_question_deleted(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    review = review_sqlite
    v = await review.publish_version(pool_id="pool-del")
    stub.script(StubReply.tool({"findings": []}))
    token = review.contributor(v["questionId"])
    assert (
        await review.call("POST", f"/questions/{v['questionId']}/review", token)
    ).status_code == 200
    await review.publish(
        "questions.v1.version.deleted",
        {
            "questionId": v["questionId"],
            "versionId": v["versionId"],
            "deletedAt": "2026-07-02T10:00:00Z",
        },
        f"version-deleted:{v['versionId']}",
    )
    await review.wait_version(v["versionId"], present=False)
    assert await review.service.repo.review_of(v["versionId"]) is None
    # A late "published" of the deleted version does not bring it back.
    await review.publish("questions.v1.version.published", v, f"late:{uuid.uuid4()}")
    w = await review.publish_version(pool_id="pool-del")
    assert await review.service.repo.version(v["versionId"]) is None
    await review.publish(
        "questions.v1.question.deleted",
        {"questionId": w["questionId"], "deletedAt": "2026-07-02T10:00:00Z"},
        f"question-deleted:{w['questionId']}",
    )
    await review.wait_version(w["versionId"], present=False)


def docs_client() -> str:
    """The plain nats-py example of docs/review.md, as written there."""
    text = DOCS.read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (client,) = [b for b in blocks if "review.v1.requests" in b and "import nats" in b]
    assert "quiz_" not in client, "the example must not use project code"
    return client


async def test_a_plain_nats_py_client_as_in_the_docs(
    review_sqlite: Review, bus: Bus, stub: AnthropicStub, tmp_path: Path
) -> None:
    """The docs' example, run as its own process (nats-py and json only) as the platform's
    user of the locked bus, drives a review."""
    review = review_sqlite
    script = tmp_path / "client.py"
    script.write_text(docs_client())
    stub.script(
        StubReply.tool(
            {
                "findings": [
                    finding(
                        "choices.0.correct",
                        "error",
                        "Sydney n'est pas la capitale.",
                        {"from": "true", "to": "false"},
                    ),
                ]
            }
        )
    )
    env = {**os.environ, "NATS_URL": bus.nats.url_for("platform")}
    out = subprocess.run(
        [sys.executable, "-I", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    assert "stored as QUESTIONS" in out.stdout

    async def answered() -> bool:
        return len(await completed_events(review.nats_url, "batch-42")) >= 1

    await eventually(answered, "the docs' request answered")
    (event,) = await completed_events(review.nats_url, "batch-42")
    assert event["review"]["state"] == "findings"
    assert event["review"]["findings"][0]["fix"] == {"from": "true", "to": "false"}
    assert event["pill"] == {"state": "findings", "count": 1, "worst": "error"}


def review_process(bus: Bus, keys: SigningKeys, directory: Path) -> ServiceProcess:
    env = {
        "NATS_URL": bus.url,
        "DATABASE_URL": f"sqlite:///{directory / 'review.db'}",
        "JWKS_FILE": str(keys.jwks_path),
        "QUIZ_DATA_DIR": str(directory),
        "REVIEW_NIGHT_AT_START": "false",
        "REVIEW_REQUEST_ACK_WAIT_S": "3",
    }
    return ServiceProcess("quiz_review.main", env, directory / "review.log")


def review_rows(directory: Path, version_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(directory / "review.db") as db:
        return db.execute(
            "SELECT version_id, state FROM question_reviews WHERE version_id = ?", (version_id,)
        ).fetchall()


async def test_killed_mid_review_is_redelivered_and_reviews_once(
    bus: Bus, stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    proc = review_process(bus, signing_keys, tmp_path).start()
    nc = await nats_connect(bus.url)
    try:
        js = nc.jetstream()
        event = {
            "questionId": f"q-{uuid.uuid4().hex[:8]}",
            "poolId": "pool-kill",
            "versionId": f"v-{uuid.uuid4().hex[:8]}",
            "versionNumber": 1,
            "type": "short",
            "config": {
                "configVersion": 1,
                "prompt": "2 + 2 ?",
                "matchers": [{"kind": "exact", "value": "5"}],
            },
            "explanation": "",
            "publishedAt": "2026-07-01T10:00:00Z",
            "live": True,
        }
        await js.publish(
            "questions.v1.version.published",
            json.dumps(event).encode(),
            headers={"Nats-Msg-Id": f"vp:{event['versionId']}"},
        )
        # The model takes its time on the first try: the review process dies meanwhile.
        reply = StubReply.tool(
            {
                "findings": [
                    finding("matchers.0.value", "error", "2 + 2 = 4.", {"from": "5", "to": "4"})
                ]
            }
        )
        stub.script(StubReply.slow(4, reply), reply)
        request = {
            "questionId": event["questionId"],
            "versionId": event["versionId"],
            "requestId": "kill-1",
        }
        await js.publish(
            "review.v1.requests",
            json.dumps(request).encode(),
            headers={"Nats-Msg-Id": f"rr:{event['versionId']}"},
        )

        async def model_called() -> bool:
            return len(stub.requests) >= 1

        await eventually(model_called, "the first model call")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.stop()
        assert review_rows(tmp_path, event["versionId"]) == []

        # Restarted: the request is redelivered (no ack came) and reviewed, once.
        proc = review_process(bus, signing_keys, tmp_path).start()

        async def one_row() -> bool:
            return len(review_rows(tmp_path, event["versionId"])) == 1

        await eventually(one_row, "the review row after the restart", timeout_s=40)
        await asyncio.sleep(4)  # past another ack_wait: nothing more arrives
        assert review_rows(tmp_path, event["versionId"]) == [(event["versionId"], "findings")]
        events = await completed_events(bus.url, "kill-1")
        assert len(events) == 1 and events[0]["review"]["state"] == "findings"
    finally:
        proc.stop()
        await nc.drain()


async def test_a_request_before_its_version_event_waits_for_it(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    """The request and the version travel on two streams: the request may arrive first."""
    review = review_sqlite
    qid, vid, rid = (
        f"q-{uuid.uuid4().hex[:8]}",
        f"v-{uuid.uuid4().hex[:8]}",
        f"early-{uuid.uuid4().hex[:6]}",
    )
    stub.script(StubReply.tool({"findings": []}))
    await review.publish(
        "review.v1.requests", {"questionId": qid, "versionId": vid, "requestId": rid}, rid
    )
    await asyncio.sleep(1.5)  # delivered at least once, nothing to review yet
    assert await completed_events(review.nats_url, rid) == []
    await review.publish(
        "questions.v1.version.published",
        {
            "questionId": qid,
            "poolId": "pool-early",
            "versionId": vid,
            "versionNumber": 1,
            "type": "mcq",
            "config": {"configVersion": 2, "prompt": "?", "choices": []},
            "explanation": "",
            "publishedAt": "2026-07-01T10:00:00Z",
            "live": True,
        },
        f"vp:{vid}",
    )

    async def answered() -> bool:
        return len(await completed_events(review.nats_url, rid)) == 1

    await eventually(answered, "the early request answered", timeout_s=20)
    (event,) = await completed_events(review.nats_url, rid)
    assert event["review"]["state"] == "clean"
