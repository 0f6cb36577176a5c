"""Thirty days after close (ADR-014 #873, amending ADR-071): guests purged, the ideas frozen as
the class saw them, the moderation read-only (409 poll_frozen) — on this replica and a new one."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from quiz_poll.main import create_app
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

from .conftest import Clock, Room, eventually, poll_settings

pytestmark = [pytest.mark.integration]


async def test_thirty_days_after_close_guests_go_and_moderation_is_read_only(
    room: Room, poll_db: str, nats_url: str, signing_keys: SigningKeys, clock: Clock
) -> None:
    await room.open()
    await room.reveal(votes=True)
    await room.answer("g1", ["respirer", "bouger"])
    await room.answer("g2", ["respirer"])
    await room.answer("a1", ["respirer", "manger"], token=room.account_token("a1", "u1"))
    await room.act({"action": "approve", "keys": ["respirer", "bouger", "manger"]})
    before = (await room.tally("wall"))["tally"]
    board_before = await room.board()
    assert {b["key"]: b["count"] for b in before["ideas"]}["respirer"] == 3

    # Closed 29 days ago: still open to moderation.
    await room.close(datetime.fromtimestamp(clock(), UTC) - timedelta(days=29, hours=23))
    r = await room.answer("g3", ["trop tard"])
    assert r.status_code == 422  # no answer after the End
    assert (await room.act({"action": "hide", "keys": ["manger"]})).status_code == 200
    assert (await room.act({"action": "approve", "keys": ["manger"]})).status_code == 200

    # An hour later it is 30 days: the sweep freezes it.
    clock.advance(3600)

    async def frozen() -> bool:
        r = await room.act({"action": "hide", "keys": ["bouger"]})
        return r.status_code == 409 and r.json()["code"] == "poll_frozen"

    await eventually(frozen)

    async def swept() -> bool:
        with sqlite3.connect(poll_db) as db:
            rows = db.execute(
                "SELECT attempt_id FROM poll_answers WHERE evaluation_id = ?", (room.id,)
            ).fetchall()
        return rows == [("a1",)]

    await eventually(swept)  # the guests' answers are gone, the account's stays
    r = await room.reveal(moderation=False)
    assert r.status_code == 409 and r.json()["code"] == "poll_frozen"
    r = await room.reveal(ai=True)
    assert r.status_code == 409
    # The room keeps the cloud it saw; the board stays readable.
    assert (await room.tally("wall"))["tally"]["ideas"] == before["ideas"]
    assert (await room.board())["clusters"] == board_before["clusters"]
    # A replica starting now reads the frozen view from the database.
    settings = poll_settings(nats_url, signing_keys, f"sqlite:///{poll_db}")
    async with serve_app(create_app(settings, clock=clock), settings) as url:
        other = Room(url, signing_keys, room.nc, room.id)
        assert (await other.tally("wall"))["tally"]["ideas"] == before["ideas"]
        assert (await other.act({"action": "reset", "keys": ["bouger"]})).status_code == 409
        await other.aclose()
