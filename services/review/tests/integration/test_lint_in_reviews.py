"""The pool's lint switch (issue 30): off by default (the platform's view unchanged); on, a
review carries the lint's notices with their code beside the model's findings, never on a
field the model named and never sent to the model; the pill counts them as notices."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from quiz_testkit.anthropic_stub import AnthropicStub, StubReply

from .conftest import Review, finding

pytestmark = pytest.mark.integration

FLAWED: dict[str, Any] = {
    "configVersion": 2,
    "prompt": "Quel animal n'est pas un mammifère ?",
    "choices": [
        {"text": "Le chat", "correct": False},
        {"text": "Le requin", "correct": True},
        {"text": "Le lion", "correct": False},
        {"text": "Aucune de ces réponses", "correct": False},
    ],
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
}


async def publish(review: Review, pool: str) -> dict[str, Any]:
    """The flawed mcq published in French (QuestionVersionPublished.language)."""
    suffix = uuid.uuid4().hex[:12]
    event = {
        "questionId": f"q-{suffix}",
        "poolId": pool,
        "versionId": f"v-{suffix}",
        "versionNumber": 1,
        "type": "mcq",
        "config": FLAWED,
        "explanation": "",
        "publishedAt": "2026-07-01T14:05:00+02:00",
        "live": True,
        "internalName": "requin",
        "language": "fr",
    }
    await review.publish(
        "questions.v1.version.published", event, f"version-published:{event['versionId']}"
    )
    await review.wait_version(event["versionId"])
    return event


async def review_now(review: Review, question_id: str, pool: str) -> Any:
    token = review.token({f"pool:{pool}": {"role": "contributor"}})
    r = await review.call("POST", f"/questions/{question_id}/review", token)
    assert r.status_code == 200, r.text
    return r.json()


async def test_off_by_default_then_on_the_notices_join_the_review(
    review: Review, stub: AnthropicStub
) -> None:
    pool = "pool-lint-reviews"
    owner = review.token({f"pool:{pool}": {"role": "owner"}})
    tab = (await review.call("GET", f"/pools/{pool}/reviews", owner)).json()
    assert "lint" not in tab  # off, and the tab reads as the platform's

    v = await publish(review, pool)
    typo = finding("choices.3.text", "notice", "Typo.")
    stub.script(StubReply.tool({"findings": [typo]}))
    off = await review_now(review, v["questionId"], pool)
    assert [f["path"] for f in off["findings"]] == ["choices.3.text"]
    assert all("code" not in f for f in off["findings"])

    r = await review.call("PUT", f"/pools/{pool}/review", owner, {"enabled": False, "lint": True})
    assert r.status_code == 200 and r.json()["lint"] is True
    stub.script(StubReply.tool({"findings": [typo]}))
    on = await review_now(review, v["questionId"], pool)
    # The model's finding first; NOTA (choices.3) dropped, the model named that choice; the
    # negative stem added as a notice with its code.
    assert [(f["path"], f["severity"], f.get("code")) for f in on["findings"]] == [
        ("choices.3.text", "notice", None),
        ("prompt", "notice", "iwf.negative_stem"),
    ]
    # Never sent to the model: its request holds the question, not the lint's words.
    sent = json.dumps(stub.requests[-1].body, ensure_ascii=False)
    assert "iwf." not in sent and "négatif" not in sent
    viewer = review.token({f"pool:{pool}": {"role": "viewer"}})
    r = await review.call("POST", "/reviews/pills", viewer, {"questionIds": [v["questionId"]]})
    assert r.json()["pills"][v["questionId"]] == {
        "state": "findings",
        "count": 2,
        "worst": "notice",
    }

    # Absent `lint` leaves the setting as it is; false turns it off.
    r = await review.call("PUT", f"/pools/{pool}/review", owner, {"enabled": True})
    assert r.json()["lint"] is True
    r = await review.call("PUT", f"/pools/{pool}/review", owner, {"enabled": True, "lint": False})
    assert "lint" not in r.json()
