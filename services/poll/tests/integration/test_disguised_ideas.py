"""A hidden idea cannot come back in disguise (issue 29, item 8), through the real service.

With moderation off (a classroom's poll: every pending idea shows) and on (an anonymous one:
the teacher approves), the teacher hides an idea; the same word typed again with a zero-width
space, a Hangul filler, a soft hyphen, a bidi mark, or Cyrillic / Greek lookalike letters keys
to the hidden idea, so it stays off the wall, the phones and the frames the platform reads.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from quiz_contracts import subjects

from .conftest import Room, eventually

pytestmark = [pytest.mark.integration]

HIDDEN = "idiot"
DISGUISES = {
    "zero-width space": "idi\u200bot",
    "zero-width joiner": "i\u200ddiot",
    "hangul filler": "idiot\u3164",
    "halfwidth hangul filler": "\uffa0idiot",
    "hangul choseong filler": "id\u115fiot",
    "soft hyphen": "idi\u00adot",
    "left-to-right mark": "\u200eidiot",
    "word joiner": "idi\u2060ot",
    "cyrillic i and o": "\u0456di\u043et",  # іdiоt
    "greek omicron": "idi\u03bft",  # idiοt
    "cyrillic capital i": "\u0406DIOT",  # ІDIOT
    "fullwidth": "ｉｄｉｏｔ",
    "mixed": "\u0456d\u200bi\u03bf\u3164t",
}


@pytest.mark.parametrize("moderation", [False, True], ids=["moderation-off", "moderation-on"])
async def test_a_hidden_idea_typed_in_disguise_stays_hidden(room: Room, moderation: bool) -> None:
    ack = await room.open(anonymous=moderation)
    assert ack.settings.moderation is moderation
    await room.reveal(votes=True)
    assert (await room.answer("a0", [HIDDEN, "respirer"])).status_code == 200
    r = await room.act({"action": "hide", "keys": [HIDDEN]})
    assert r.status_code == 200, r.text
    if moderation:
        r = await room.act({"action": "approve", "keys": ["respirer"]})
        assert r.status_code == 200, r.text
    frames: list[dict[str, Any]] = []

    async def on_frame(msg: Any) -> None:
        frames.append(json.loads(msg.data))

    sub = await room.nc.subscribe(subjects.poll_tally_subject(room.id), cb=on_frame)
    for n, disguise in enumerate(DISGUISES.values(), start=1):
        r = await room.answer(f"a{n}", [disguise, "respirer"])
        assert r.status_code == 200, r.text

    last = len(DISGUISES) + 1  # every participant, counted on the visible idea

    async def counted() -> Any:
        wall = await room.tally("wall")
        ideas = wall["tally"]["ideas"]
        return wall if ideas and ideas[0]["count"] == last else None

    wall = await eventually(counted)
    await eventually(lambda: _async_true(any(_counts(f) == [last] for f in frames)))
    await sub.unsubscribe()
    phone = await room.tally("phone")
    assert wall["tally"]["ideas"] == [{"key": "respirer", "label": "respirer", "count": last}]
    assert phone["tally"]["ideas"] == wall["tally"]["ideas"]
    for public in (wall, phone, *frames):
        text = json.dumps(public, ensure_ascii=False)
        for disguise in (HIDDEN, *DISGUISES.values()):
            assert disguise not in text, (disguise, text)
    # The board: one idea, hidden, with every participant who typed it in any disguise.
    variants = await room.statuses()
    assert set(variants) == {HIDDEN, "respirer"}
    assert variants[HIDDEN]["status"] == "hidden"
    assert variants[HIDDEN]["count"] == last


def _counts(frame: dict[str, Any]) -> list[int]:
    return [i["count"] for i in frame["tally"]["ideas"]]


async def _async_true(value: bool) -> bool:
    return value
