"""Issue 21 through the real service: the edge refuses what the platform refuses (an idea over 60
UTF-16 units, a time without its zone), one client cannot hold unbounded SSE streams."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from quiz_contracts import subjects

from .conftest import Room, eventually, new_id

pytestmark = [pytest.mark.integration]


async def test_an_idea_is_counted_in_utf16_units(room: Room) -> None:
    await room.open()
    # 60 emoji are 120 UTF-16 units: the platform's schema refuses them, so does the service.
    r = await room.answer("a1", ["🙂" * 60])
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    r = await room.answer("a1", ["🙂" * 31])
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    r = await room.answer("a1", ["🙂" * 30])
    assert r.status_code == 200 and r.json() == {"ideas": ["🙂" * 30]}, r.text


async def test_open_refuses_a_time_without_its_zone(room: Room) -> None:
    body = {
        "evaluationId": room.id,
        "teacherId": room.teacher,
        "audience": {"kind": "anonymous"},
        "question": {"prompt": "Vivant ?"},
        "openedAt": "2026-10-20T09:00:00",
    }
    raw = await room.nc.request(subjects.POLL_OPEN, json.dumps(body).encode(), timeout=10)
    assert json.loads(raw.data)["code"] == "invalid_request"
    # Nothing was opened: the same body with its offset opens the poll.
    r = await room.answer("a1", ["vélo"])
    assert r.status_code == 404
    body["openedAt"] = "2026-10-20T11:00:00+02:00"
    raw = await room.nc.request(subjects.POLL_OPEN, json.dumps(body).encode(), timeout=10)
    assert json.loads(raw.data)["ok"] is True
    raw = await room.nc.request(
        subjects.POLL_CLOSE,
        json.dumps({"evaluationId": room.id, "closedAt": "2026-10-20T12:00:00"}).encode(),
        timeout=10,
    )
    assert json.loads(raw.data)["code"] == "invalid_request"


async def _open_stream(stack: AsyncExitStack, http: httpx.AsyncClient, url: str, token: str) -> Any:
    """Open one SSE stream and keep it open (until `stack` closes); its response."""
    response = await stack.enter_async_context(
        http.stream("GET", url, headers={"authorization": f"Bearer {token}"})
    )
    return response


async def _refused(http: httpx.AsyncClient, url: str, token: str) -> tuple[int, Any]:
    """The status of one more stream and, unless it opened, its JSON error (an open stream is
    closed at once: its body never ends)."""
    async with http.stream("GET", url, headers={"authorization": f"Bearer {token}"}) as r:
        if r.status_code == 200:
            return 200, None
        assert r.headers["content-type"].startswith("application/json")
        return r.status_code, json.loads(await r.aread())


async def test_sse_streams_are_capped_per_participant_and_per_token(room: Room) -> None:
    await room.open()
    guest = room.guest_token("g1")
    phone = f"{room.base}/stream?audience=phone"
    async with AsyncExitStack() as stack:
        for _ in range(4):  # POLL_SSE_PER_PARTICIPANT
            r = await _open_stream(stack, room.http, phone, guest)
            assert r.status_code == 200
        status, error = await _refused(room.http, phone, guest)
        assert status == 429 and error["code"] == "rate_limited", error
        assert error["details"] == {"limit": 4, "per": "participant"}
        # Another token of the same attempt is the same participant.
        again = room.keys.mint(
            "guest-g1-again",
            {f"evaluation:{room.id}": {"role": "viewer", "attempt": "g1", "guest": True}},
        )
        assert (await _refused(room.http, phone, again))[0] == 429
        # Another participant is not held back by this one.
        other = await _open_stream(stack, room.http, phone, room.guest_token("g2"))
        assert other.status_code == 200

    # The streams closed: their places are free again (once the server saw them go).
    async def reopened() -> bool:
        async with room.http.stream(
            "GET", phone, headers={"authorization": f"Bearer {guest}"}
        ) as r:
            return r.status_code == 200

    assert await eventually(reopened)

    # One token reaching three polls: 4 streams on each of two, then the token's cap (8).
    second = Room(room.url, room.keys, room.nc, new_id())
    third = Room(room.url, room.keys, room.nc, new_id())
    await second.open()
    await third.open()
    grants = {f"evaluation:{r.id}": {"role": "owner"} for r in (room, second, third)}
    teacher = room.keys.mint("teacher-of-three", grants)
    async with AsyncExitStack() as stack:
        for r_ in (room, second):
            for audience in ("wall", "wall", "phone"):
                r = await _open_stream(
                    stack, room.http, f"{r_.base}/stream?audience={audience}", teacher
                )
                assert r.status_code == 200
            r = await _open_stream(stack, room.http, f"{r_.base}/board/stream", teacher)
            assert r.status_code == 200
        status, error = await _refused(room.http, f"{third.base}/board/stream", teacher)
        assert status == 429 and error["details"] == {"limit": 8, "per": "token"}, error
    await second.aclose()
    await third.aclose()
