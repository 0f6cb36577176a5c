"""natsio's connection: each user's replies under its own prefix (issue 21), and JetStream
and the KV lease still working through it on the locked bus."""

from __future__ import annotations

from pathlib import Path

import pytest

from quiz_contracts import subjects as s
from quiz_servicekit.lease import KvLease, open_lease_bucket
from quiz_servicekit.natsio import connect_nats, inbox_prefix_for
from quiz_testkit.nats_server import NatsServer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("url", "user", "prefix"),
    [
        ("nats://review:pw@127.0.0.1:4222", None, "_INBOX_review"),
        # The explicit user (NATS_USER, a credentials file) is the one that connects.
        ("nats://ops:pw@127.0.0.1:4222", "runner", "_INBOX_runner"),
        ("nats://127.0.0.1:4222", "editor-assist", "_INBOX_editor-assist"),
        # A list (NATS_URL of a cluster): the first server with credentials names the user.
        ("nats://a:4222, nats://platform:pw@b:4222", None, "_INBOX_platform"),
        ("platform:pw@b:4222", None, "_INBOX_platform"),
        # No user, or a token (never put in a subject): nats-py's default.
        ("nats://127.0.0.1:4222", None, "_INBOX"),
        ("nats://s3cr3t-token@127.0.0.1:4222", None, "_INBOX"),
    ],
)
def test_inbox_prefix_for(url: str, user: str | None, prefix: str) -> None:
    assert inbox_prefix_for(url, user) == prefix


async def test_a_service_connection_uses_its_prefix_for_jetstream_and_kv(tmp_path: Path) -> None:
    """Review's connection as `connect_nats` makes it: JetStream API replies, publish acks,
    pull fetches and the KV lease (its gets, creates and updates) all answer on
    `_INBOX_review.…`, the one inbox the locked bus lets review read — and nothing is
    refused."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        nc = await connect_nats(
            server.plain_url, "review", user="review", password=server.passwords["review"]
        )
        assert nc.new_inbox().startswith("_INBOX_review.")
        js = nc.jetstream()
        await js.account_info()
        # The stream, its consumer and the lease bucket: provisioned (NatsServer.start).
        ack = await js.publish(s.REVIEW_REQUESTS, b"{}")
        assert ack.stream == s.REVIEW_REQUESTS_STREAM
        sub = await js.pull_subscribe(
            s.REVIEW_REQUESTS, durable="review-requests", stream=s.REVIEW_REQUESTS_STREAM
        )
        (msg,) = await sub.fetch(1, timeout=5)
        await msg.ack_sync()

        kv, ttl_s = await open_lease_bucket(js, "review_leases", ttl_s=30)
        lease = KvLease(kv, "night", holder="review-test", ttl_s=ttl_s)
        assert await lease.try_acquire()
        await lease.renew()
        assert await lease.current_holder() == "review-test"
        await lease.release()
        await nc.close()
        assert server.violations() == []
    finally:
        server.stop()
