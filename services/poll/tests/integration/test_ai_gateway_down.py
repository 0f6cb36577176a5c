"""An AI batch the gateway did not answer is retried, not failed (issue 20, item 3).

Its own module, bus and gateway: the gateway is stopped mid-test, which the module-wide one of
the other modules must never be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quiz_poll.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import llm_gateway_process
from quiz_testkit.serving import serve_app

from .conftest import Clock, Room, eventually, new_id, poll_settings
from .test_ai import ai_on, all_judged, judge

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_a_batch_the_gateway_did_not_answer_is_retried_not_failed(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path, clock: Clock
) -> None:
    """The gateway is down when the pass calls (no responders): the job is redelivered under
    the same lease and judged once the gateway is back, no error on the board. Before, the
    board showed `provider_error` (llm_failed), the lease was freed and nothing was judged
    until an answer came 30 s later."""
    stub.default = StubReply.callable(judge)
    server = NatsServer(tmp_path / "nats").start()
    gateway = llm_gateway_process(server.url, stub.base_url, tmp_path / "gateway").start()
    nc = await nats_connect(server.url)
    try:
        settings = poll_settings(server.url, signing_keys, f"sqlite:///{tmp_path / 'poll.db'}")
        async with serve_app(create_app(settings, clock=clock), settings) as url:
            room = Room(url, signing_keys, nc, new_id())
            await ai_on(room)
            gateway.stop()
            assert (await room.answer("a1", ["respirer", "gros mot"])).status_code == 200
            # Due in 3 s, then 5 s of "no responders": the job goes back to the queue.
            await asyncio.sleep(9)
            assert (await room.board())["ai"]["error"] is None
            assert not await all_judged(room)
            gateway.start()
            await eventually(lambda: all_judged(room), timeout=60)
            statuses = await room.statuses()
            assert statuses["gros mot"]["status"] == "hidden"
            assert (await room.board())["ai"]["error"] is None
            assert len(stub.requests) == 1
            await room.aclose()
    finally:
        await nc.drain()
        gateway.stop()
        server.stop()
