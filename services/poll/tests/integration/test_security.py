"""Issue 21 through the real service: the edge refuses what the platform refuses (an idea over 60
UTF-16 units, a time without its zone), one client cannot hold unbounded SSE streams."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from quiz_contracts import subjects
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply

from .conftest import Room, eventually, new_id, sse_frames

pytestmark = [pytest.mark.integration]


async def test_an_idea_is_counted_in_utf16_units(room: Room) -> None:
    await room.open()
    # 60 emoji are 120 UTF-16 units: the platform's schema refuses them, so does the service.
    r = await room.answer("a1", ["🙂" * 60])
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    r = await room.answer("a1", ["🙂" * 31])
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    r = await room.answer("a1", ["🙂" * 30])
    assert r.status_code == 200 and r.json()["ideas"] == ["🙂" * 30], r.text


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


# --- another spelling of an approved idea (item 2 of issue 21) --------------------------------

RLO, STACK = "\u202e", "\u0336\u0337\u0338"


async def test_a_new_spelling_of_an_approved_idea_never_reaches_the_room(room: Room) -> None:
    ack = await room.open()
    assert ack.settings.moderation is True  # anonymous: moderation on
    await room.reveal(votes=True)
    assert (await room.answer("a1", ["vélo"])).status_code == 200
    r = await room.act({"action": "approve", "keys": ["velo"]})
    assert r.status_code == 200, r.text
    frames_seen: list[bytes] = []

    async def on_frame(msg: Any) -> None:
        frames_seen.append(msg.data)

    sub = await room.nc.subscribe(subjects.poll_tally_subject(room.id), cb=on_frame)
    # Same key "velo", three ways of making the room read something else.
    typed = {
        "a2": "VELO 🖕",
        "a3": f"{RLO}vélo 🖕",  # drawn "🖕 olév" right to left
        "a4": f"VE\u0301{STACK}LO",  # "VÉLO" under a stack of marks
        "a5": f"vé{STACK}lo",  # the approved spelling under a stack: reads as approved
    }
    for attempt, idea in typed.items():
        r = await room.answer(attempt, [idea])
        assert r.status_code == 200, r.text

    async def counted() -> Any:
        wall = await room.tally("wall")
        return wall if wall["tally"]["ideas"] and wall["tally"]["ideas"][0]["count"] == 5 else None

    wall = await eventually(counted)

    async def published() -> bool:
        # The tally above is read from the cache at once; the public frame of the same state is
        # coalesced (50 ms) and then published: wait for it, or the leak check below reads
        # no frame at all on a loaded host.
        counts = [[i["count"] for i in json.loads(raw)["tally"]["ideas"]] for raw in frames_seen]
        return [5] in counts

    await eventually(published)
    phone = await room.tally("phone")
    assert wall["tally"]["ideas"] == [{"key": "velo", "label": "vélo", "count": 5}]
    assert phone["tally"]["ideas"] == wall["tally"]["ideas"]
    assert phone["sharedList"] == [{"key": "velo", "label": "vélo"}]
    assert wall["tally"]["pending"] == 0  # nothing new to moderate as an idea…
    # …but the board lists the new spellings, as the room would read them.
    (variant,) = (await room.board())["clusters"][0]["variants"]
    assert variant["status"] == "approved"
    assert variant["newSpellings"] == ["VELO 🖕", "vélo 🖕", "VÉLO"]
    # The phones' stream and the frames the platform reads say the same.
    async with room.http.stream(
        "GET",
        f"{room.base}/stream?audience=phone",
        headers={"authorization": f"Bearer {room.guest_token('a2')}"},
    ) as stream:
        async for chunk in stream.aiter_text():
            (event,) = sse_frames(chunk)
            assert event["data"]["sharedList"] == [{"key": "velo", "label": "vélo"}]
            public = [chunk]
            break
    await sub.unsubscribe()
    public += [json.dumps(await room.tally(a)) for a in ("wall", "phone")]
    public += [raw.decode() for raw in frames_seen]
    assert len(public) > 3  # frames were published after the new spellings
    for text in public:
        for leak in ("🖕", "\\ud83d", RLO, "\\u202e", "\u0336", "\\u0336", "VELO", "VÉLO"):
            assert leak not in text, (leak, text)
    # The teacher approves what the board showed: from then on the room may read it.
    for attempt in ("a6", "a7"):
        await room.answer(attempt, [f"VE\u0301{STACK}LO"])
    r = await room.act({"action": "approve", "keys": ["velo"], "spellings": ["VÉLO"]})
    assert r.status_code == 200, r.text
    wall = await room.tally("wall")
    assert wall["tally"]["ideas"] == [{"key": "velo", "label": "VÉLO", "count": 7}]
    (variant,) = (await room.board())["clusters"][0]["variants"]
    assert variant["newSpellings"] == ["VELO 🖕", "vélo 🖕"]


# --- ideas typed before the AI switch (item 3 of issue 21, ADR-072 §5) -------------------------


def _prompt(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def _listed(body: dict[str, Any], heading: str) -> list[dict[str, str]]:
    """The ideas a call sent under `heading` ("Ideas on the wall", "NEW ideas to judge")."""
    for part in _prompt(body).split("\n\n"):
        if part.startswith(f"{heading} (data): "):
            return json.loads(part.removeprefix(f"{heading} (data): "))
    raise AssertionError(f"no {heading!r} in the prompt")


def _approve_all(body: dict[str, Any]) -> StubReply:
    """A model that approves every new idea, corrected to its capitalised text."""
    ideas = _listed(body, "NEW ideas to judge")
    return StubReply.tool(
        {
            "ideas": [
                {
                    "id": i["id"],
                    "offensive": False,
                    "correction": i["text"].capitalize(),
                    "sameAs": None,
                }
                for i in ideas
            ]
        }
    )


async def test_ideas_typed_before_the_ai_switch_never_leave_not_even_as_context(
    room: Room, stub: AnthropicStub
) -> None:
    stub.default = StubReply.callable(_approve_all)
    await room.open()
    await room.reveal(votes=True)
    await room.answer("a1", ["respire"])
    await room.answer("a2", ["mange"])
    r = await room.reveal(ai=True)
    assert r.status_code == 200, r.text
    # The teacher approves the two ideas typed before the notice: they are on the wall now.
    r = await room.act({"action": "approve", "keys": ["respire", "mange"]})
    assert r.status_code == 200, r.text
    labels = {b["label"] for b in (await room.tally("wall"))["tally"]["ideas"]}
    assert labels == {"respire", "mange"}

    async def judged(key: str) -> bool:
        return (await room.statuses()).get(key, {}).get("ai") is True

    # An idea typed after the switch: judged, with the wall as context.
    await room.answer("a3", ["dort"])
    await eventually(lambda: judged("dort"), timeout=30)
    # The teacher puts it with an idea typed before (their head), and a last idea comes.
    r = await room.act({"action": "merge", "keys": ["dort"], "into": "respire"})
    assert r.status_code == 200, r.text
    await room.answer("a4", ["court"])
    await eventually(lambda: judged("court"), timeout=30)

    assert len(stub.requests) == 2
    first, second = (r.body for r in stub.requests)
    assert [i["text"] for i in _listed(first, "NEW ideas to judge")] == ["dort"]
    assert _listed(first, "Ideas on the wall") == []  # "respire" and "mange" are the teacher's
    assert [i["text"] for i in _listed(second, "NEW ideas to judge")] == ["court"]
    # The merged cluster goes as the idea typed after the switch, its key and label never
    # the head's; "mange" does not go at all.
    assert [i["text"] for i in _listed(second, "Ideas on the wall")] == ["Dort"]
    for body in (first, second):
        sent = json.dumps(body, ensure_ascii=False).lower()
        assert "respire" not in sent and "mange" not in sent
