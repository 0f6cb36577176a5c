"""Two replicas of poll on one database (SQLite, and PostgreSQL when it answers).

Its own module: no other poll service may sit in the `poll` queue group of the bus, or it could
take the `poll.v1.open` of a poll it has no database for.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from quiz_poll.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

from .conftest import Clock, Room, eventually, new_id, poll_settings
from .test_ai import ai_on, all_judged, judge, new_ideas

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_two_replicas_run_one_batch_at_a_time(
    stub: AnthropicStub,
    llm_gateway: Any,
    nats_url: str,
    signing_keys: SigningKeys,
    database_url: str,
    clock: Clock,
    nc: Any,
) -> None:
    """Two replicas on one database (SQLite, and PostgreSQL when it answers): answers reach
    both, one pass holds the lease, the calls never overlap, and both replicas end with the
    same board (each re-reads what the other changed).

    How many calls it takes depends on which answers a pass's replica had seen when it chose
    its batches: three when one pass saw all 120 ideas, more when a pass ended before the other
    replica's answers reached it and the next pass took the rest (seen once in CI)."""
    starts: list[float] = []
    batches: list[list[str]] = []

    def slow_judge(body: dict[str, Any]) -> StubReply:
        starts.append(time.monotonic())
        batches.append([idea["text"] for idea in new_ideas(body)])
        return StubReply.slow(1.0, judge(body))

    stub.default = StubReply.callable(slow_judge)
    settings = poll_settings(nats_url, signing_keys, database_url)
    async with (
        serve_app(create_app(settings, clock=clock), settings) as first_url,
        serve_app(create_app(settings, clock=clock), settings) as second_url,
    ):
        room = Room(first_url, signing_keys, nc, new_id())
        other = Room(second_url, signing_keys, nc, room.id)
        await ai_on(room)
        rooms = [room, other]
        await asyncio.gather(
            *(rooms[i % 2].answer(f"a{i}", [f"rep{i}x{j}" for j in range(5)]) for i in range(24))
        )
        await eventually(lambda: all_judged(room), timeout=40)
        await eventually(lambda: all_judged(other), timeout=10)

        async def same() -> bool:
            return (await room.board())["clusters"] == (await other.board())["clusters"]

        await eventually(same, timeout=10)
        await room.aclose()
        await other.aclose()
    # Batches of at most 50 (FACTS D "Batches"): 120 ideas take three calls at least, and
    # every idea was sent.
    assert len(starts) >= 3 and all(len(b) <= 50 for b in batches), [len(b) for b in batches]
    assert len({text for b in batches for text in b}) == 120
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(g >= 0.95 for g in gaps), gaps  # never two calls at once


async def test_the_pass_survives_the_replica_that_claimed_it(
    stub: AnthropicStub,
    llm_gateway: Any,
    nats_url: str,
    signing_keys: SigningKeys,
    tmp_path: Any,
    clock: Clock,
    nc: Any,
) -> None:
    """The replica whose answer claimed the lease stops before the job is due: its shutdown
    either finishes the job within its grace period or hands it back unacked to the queue, where
    the other replica takes it under the same lease. Either way the ideas are judged, once."""
    stub.default = StubReply.callable(judge)
    settings = poll_settings(nats_url, signing_keys, f"sqlite:///{tmp_path / 'poll.db'}")
    async with serve_app(create_app(settings, clock=clock), settings) as second_url:
        other = Room(second_url, signing_keys, nc, new_id())
        async with serve_app(create_app(settings, clock=clock), settings) as first_url:
            room = Room(first_url, signing_keys, nc, other.id)
            await ai_on(room)
            r = await room.answer("a1", ["respirer", "gros mot"])
            assert r.status_code == 200
            await room.aclose()
        # The first replica is stopping before the job's 3 s.
        await eventually(lambda: all_judged(other), timeout=40)
        statuses = await other.statuses()
        assert statuses["gros mot"]["status"] == "hidden"
        assert len(stub.requests) == 1
        await other.aclose()
