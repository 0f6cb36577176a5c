"""The routes of poll-api.md over real HTTP, the NATS edge, the frames on SSE and NATS."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_testkit.nats_server import nats_connect

from .conftest import Room, eventually, new_id, sse_frames

pytestmark = [pytest.mark.integration]


async def test_open_answer_board_and_cloud(room: Room) -> None:
    ack = await room.open()
    assert ack.settings.moderation is True and ack.settings.ai is False  # anonymous: ON
    r = await room.answer("a1", ["Respirer", "l'eau"])
    assert r.status_code == 200, r.text
    # Moderation on: both ideas wait for the teacher (the page says so under each, issue 22).
    assert r.json() == {"ideas": ["Respirer", "l'eau"], "waiting": ["Respirer", "l'eau"]}
    await room.answer("a2", ["respirer !", "Bouger"])
    mine = await room.http.get(
        f"{room.base}/answer", headers={"authorization": f"Bearer {room.guest_token('a1')}"}
    )
    assert mine.json() == {"ideas": ["Respirer", "l'eau"], "waiting": ["Respirer", "l'eau"]}
    board = await room.board()
    assert board["pending"] == 3 and board["answered"] == 2
    assert board["clusters"][0]["key"] == "respirer"
    # Moderation on: nothing reaches the room before the teacher approves.
    wall = await room.tally("wall")
    assert wall["tally"]["ideas"] == [] and wall["tally"]["pending"] == 3  # votes hidden
    await room.reveal(votes=True)
    r = await room.act({"action": "approve", "keys": ["respirer"]})
    assert r.status_code == 200, r.text
    wall = await room.tally("wall")
    assert wall["tally"]["ideas"] == [{"key": "respirer", "label": "Respirer", "count": 2}]
    assert wall["tally"]["pending"] == 2
    phone = await room.tally("phone")
    assert phone["tally"]["pending"] == 0
    mine = await room.http.get(
        f"{room.base}/answer", headers={"authorization": f"Bearer {room.guest_token('a1')}"}
    )
    assert mine.json()["waiting"] == ["l'eau"]  # "Respirer" approved: on the wall
    assert "eau" not in json.dumps(phone) and "Bouger" not in json.dumps(wall)
    # The board's own stream (staff): a PollIdeaBoard snapshot at once.
    headers = {"authorization": f"Bearer {room.staff_token()}"}
    async with room.http.stream("GET", f"{room.base}/board/stream", headers=headers) as r:
        assert r.status_code == 200
        async for chunk in r.aiter_text():
            event = sse_frames(chunk)[0]
            assert event["event"] == "poll.board" and event["data"]["pending"] == 2
            break
    guest = {"authorization": f"Bearer {room.guest_token('a1')}"}
    assert (await room.http.get(f"{room.base}/board/stream", headers=guest)).status_code == 404


async def test_grants_and_errors(room: Room, signing_keys: Any) -> None:
    await room.open(max_ideas=2)
    # A participant may not read the board or the wall: 404, not 403.
    token = room.guest_token("a1")
    h = {"authorization": f"Bearer {token}"}
    assert (await room.http.get(f"{room.base}/ideas", headers=h)).status_code == 404
    r = await room.http.get(f"{room.base}/tally?audience=wall", headers=h)
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    # Another evaluation's grant reaches nothing here.
    other = signing_keys.mint("x", {"evaluation:other": {"role": "owner"}})
    r = await room.http.get(f"{room.base}/ideas", headers={"authorization": f"Bearer {other}"})
    assert r.status_code == 404
    assert (await room.http.get(f"{room.base}/ideas")).status_code == 401
    # Over maxIdeas: 422 answer_invalid; an idea over 60 characters: 400 invalid_request.
    r = await room.answer("a1", ["un", "deux", "trois"])
    assert r.status_code == 422 and r.json()["code"] == "answer_invalid"
    r = await room.answer("a1", ["x" * 61])
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    # A key that is not an idea key is refused before anything is written.
    r = await room.act({"action": "hide", "keys": ["Not A Key"]})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    r = await room.reveal(revealed=True)
    assert r.status_code == 422 and r.json()["code"] == "poll_keyless"
    # No brainstorm on that evaluation: 404 for everyone.
    ghost = Room(room.url, room.keys, room.nc, new_id())
    assert (await ghost.staff("GET", "/ideas")).status_code == 404
    await ghost.aclose()


async def test_every_action_and_the_audit(room: Room) -> None:
    await room.open(anonymous=False)  # a classroom's: moderation OFF
    await room.reveal(votes=True)
    await room.answer("a1", ["respirer", "bouger", "gros mot"])
    await room.answer("a2", ["respiration", "manger"])
    for body in (
        {"action": "hide", "keys": ["gros mot"]},
        {"action": "merge", "keys": ["respiration"], "into": "respirer"},
        {"action": "rename", "key": "respiration", "label": "Respirer"},
        {"action": "approve", "keys": ["manger"]},
        {"action": "reset", "keys": ["manger"]},
        {"action": "detach", "keys": ["respiration"]},
        {"action": "merge", "keys": ["respiration"], "into": "respirer"},
    ):
        r = await room.act(body)
        assert r.status_code == 200, (body, r.text)
    board = await room.board()
    head = next(c for c in board["clusters"] if c["key"] == "respirer")
    assert head["total"] == 2 and {v["key"] for v in head["variants"]} == {
        "respirer",
        "respiration",
    }
    wall = (await room.tally("wall"))["tally"]
    assert "gros mot" not in json.dumps(wall)
    assert {b["key"]: b["count"] for b in wall["ideas"]}["respiration"] == 2  # smallest key


async def test_sse_coalesced_frames_reconnect_snapshot_and_nats(room: Room, nc: NATS) -> None:
    await room.open(anonymous=False)
    await room.reveal(votes=True)
    got: list[dict[str, Any]] = []

    async def on_frame(msg: Any) -> None:
        got.append(json.loads(msg.data))

    sub = await nc.subscribe(subjects.poll_tally_subject(room.id), cb=on_frame)
    token = room.guest_token("watcher")
    headers = {"authorization": f"Bearer {token}"}
    received: list[dict[str, Any]] = []

    async def read_stream() -> None:
        async with room.http.stream(
            "GET", f"{room.base}/stream?audience=phone", headers=headers
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["x-accel-buffering"] == "no"
            buf = ""
            async for chunk in r.aiter_text():
                buf += chunk
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    received.extend(sse_frames(block + "\n\n"))

    reader = asyncio.create_task(read_stream())
    await eventually(lambda: _true(bool(received)))
    first = received[0]
    assert first["event"] == "poll.tally" and first["data"]["audience"] == "phone"
    # A burst of 30 answers is a few frames, not 30.
    await asyncio.gather(*(room.answer(f"p{i}", [f"idée {i % 3}"]) for i in range(30)))

    async def all_in() -> bool:
        return bool(received) and received[-1]["data"]["tally"]["answered"] == 30

    await eventually(all_in)
    assert len(received) < 15, len(received)
    seqs = [int(f["id"]) for f in received]
    assert seqs == sorted(seqs)
    reader.cancel()
    # NATS got the same frames (wall and phone).
    await eventually(lambda: _true(any(f["tally"] and f["tally"]["answered"] == 30 for f in got)))
    assert {f["audience"] for f in got} == {"wall", "phone"}
    await sub.unsubscribe()
    # Reconnect: an older Last-Event-ID gets the latest frame at once; the latest gets nothing.
    latest = seqs[-1]
    async with room.http.stream(
        "GET", f"{room.base}/stream?audience=phone", headers={**headers, "Last-Event-ID": "1"}
    ) as r:
        async for chunk in r.aiter_text():
            frames = sse_frames(chunk)
            assert int(frames[0]["id"]) == latest
            break


async def _true(value: bool) -> bool:
    return value


async def test_nats_edge(room: Room, nc: NATS) -> None:
    with pytest.raises(ContractError) as e:
        await room.close(datetime.now(UTC))
    assert e.value.code is ErrorCode.not_found
    await room.open()
    ack = await room.join(
        "a1",
        user="u1",
        person={"givenName": "Ada", "familyName": "Lovelace", "email": "ada@example.org"},
    )
    assert ack.joined == 1
    await room.join("g1")
    ack = await room.open()  # idempotent
    assert ack.joined == 2
    raw = await nc.request(subjects.POLL_JOIN, b'{"evaluationId": "x"}', timeout=5)
    assert json.loads(raw.data)["code"] == "invalid_request"


async def test_ai_on_is_refused_when_no_model_can_be_called(
    signing_keys: Any, tmp_path: Any
) -> None:
    """A bus with no gateway: the availability question has no answer, so no model can be
    called and turning AI on is 422 llm_unavailable (ADR-072 §3); the rest of the poll works."""
    from quiz_poll.main import create_app
    from quiz_testkit.nats_server import NatsServer
    from quiz_testkit.serving import serve_app

    from .conftest import poll_settings

    server = NatsServer(tmp_path / "nats").start()
    try:
        settings = poll_settings(server.url, signing_keys, f"sqlite:///{tmp_path / 'p.db'}")
        async with serve_app(create_app(settings), settings) as url:
            nc = await nats_connect(server.url)
            lone = Room(url, signing_keys, nc, new_id())
            await lone.open()
            r = await lone.reveal(ai=True)
            assert r.status_code == 422 and r.json()["code"] == "llm_unavailable"
            board = await lone.board()
            assert board["ai"] == {
                "available": False,
                "on": False,
                "error": None,
                "calls": 0,
                "runCap": 200,
            }
            assert (await lone.reveal(votes=True)).status_code == 200
            await lone.aclose()
            await nc.close()
    finally:
        server.stop()


async def test_run_again_starts_with_no_mark_and_ai_off(room: Room) -> None:
    await room.open(anonymous=False)
    await room.answer("a1", ["respirer"])
    await room.act({"action": "hide", "keys": ["respirer"]})
    again = Room(room.url, room.keys, room.nc, new_id())
    body = {
        "evaluationId": again.id,
        "againOf": room.id,
        "teacherId": again.teacher,
        "audience": {"kind": "classroom", "classroomId": "c1"},
        "question": {"prompt": "Vivant ?"},
        "openedAt": datetime.now(UTC).isoformat(),
    }
    raw = await room.nc.request(subjects.POLL_OPEN, json.dumps(body).encode(), timeout=10)
    ack = json.loads(raw.data)
    assert ack["ok"] is True and ack["settings"]["ai"] is False and ack["answered"] == 0
    await again.answer("a1", ["respirer"])
    statuses = await again.statuses()
    assert statuses["respirer"]["status"] == "pending"  # the first run's hide does not follow
    await again.aclose()
