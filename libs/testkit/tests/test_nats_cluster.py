"""The kit's nats_cluster: three real nats-servers that lose, regain and restart a node."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import nats
import pytest
from nats.errors import NoServersError
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from quiz_testkit.nats_cluster import NatsCluster, nats_cluster
from quiz_testkit.nats_server import nats_connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def publish_until_stored(js: JetStreamContext, k: int) -> None:
    """Publish message `k` as a caller does across a lost node: the same Nats-Msg-Id again
    (stored once) until JetStream acknowledges it; fail after 60 s. The connection may have
    been on the killed node: a request sent while it reconnects can lose its reply."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await js.publish(
                "kit.r3.a", f"{k}".encode(), timeout=5, headers={"Nats-Msg-Id": f"m{k}"}
            )
            return
        except nats.errors.Error:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with nats_cluster(3) as c:
        yield c


async def test_a_replicated_stream_survives_its_leader_killed_and_restarted(
    cluster: NatsCluster,
) -> None:
    nc = await nats_connect(cluster.url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="KIT_R3", subjects=["kit.r3.>"], num_replicas=3))
    for k in range(5):
        await js.publish("kit.r3.a", f"{k}".encode())
    leader = cluster.stream_leader("KIT_R3")
    assert 0 <= leader < 3

    cluster.kill(leader)
    assert leader not in cluster.running()
    survivor = cluster.stream_leader("KIT_R3", timeout_s=20)
    assert survivor != leader
    for k in range(5, 10):
        await publish_until_stored(js, k)

    cluster.start(leader)
    cluster.wait_healthy()
    info = await js.stream_info("KIT_R3")
    assert info.state.messages == 10
    assert info.cluster is not None
    assert sorted([info.cluster.leader or "", *(r.name for r in info.cluster.replicas or [])]) == [
        "n0",
        "n1",
        "n2",
    ]
    await nc.close()


async def test_a_restarted_node_comes_back_on_its_port_with_its_store(
    cluster: NatsCluster,
) -> None:
    nc = await nats_connect(cluster.url, max_reconnect_attempts=-1)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="KIT_R1", subjects=["kit.r1.>"], num_replicas=1))
    await js.publish("kit.r1.a", b"kept")
    holder = cluster.stream_leader("KIT_R1")
    await nc.close()

    cluster.restart(holder)
    cluster.wait_healthy()
    # Only the restarted node holds this one-replica stream: the message is still there, so
    # the node came back with its own store, and answers on its old client port.
    only = await nats_connect(cluster.urls[holder], allow_reconnect=False)
    msg = await only.jetstream().get_last_msg("KIT_R1", "kit.r1.a")
    assert msg.data == b"kept"
    await only.close()


async def test_the_cluster_runs_the_locked_bus(cluster: NatsCluster) -> None:
    assert cluster.locked and "ops:" in cluster.url
    # No credentials: every node refuses the connection.
    with pytest.raises((NoServersError, nats.errors.Error, OSError)):
        await nats.connect(servers=cluster.plain_urls, allow_reconnect=False, connect_timeout=2)
    # A service user connects with its own password on any node.
    review = await nats_connect(",".join(cluster.urls_for("review")[::-1]))
    assert review.is_connected
    await review.close()


async def test_a_client_given_the_list_connects_while_the_first_node_is_down(
    cluster: NatsCluster,
) -> None:
    cluster.stop(0)
    try:
        nc = await nats_connect(cluster.url, dont_randomize=True, connect_timeout=2)
        assert nc.connected_url is not None
        assert nc.connected_url.port != cluster.nodes[0].port
        await nc.close()
    finally:
        cluster.start(0)
        cluster.wait_healthy()
