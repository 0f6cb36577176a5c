"""The routes end to end: each state and its pill, the tab, the switch, Review now, Ignore,
Fix / Undo / fix_stale on the draft, the refusals and the grants (real gateway, scripted model)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from quiz_contracts.llm import Purpose
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply

from .conftest import Review, eventually, finding, mcq

pytestmark = pytest.mark.integration


def script_findings(stub: AnthropicStub, *findings: dict[str, Any]) -> None:
    stub.script(StubReply.tool({"findings": list(findings)}))


async def review_now(
    review: Review, question_id: str, token: str | None = None, key: str | None = None
) -> Any:
    return await review.call(
        "POST",
        f"/questions/{question_id}/review",
        token or review.contributor(question_id),
        headers={"Idempotency-Key": key} if key else None,
    )


async def pills(review: Review, pool_id: str, *question_ids: str) -> dict[str, Any]:
    token = review.token({f"pool:{pool_id}": {"role": "viewer"}})
    r = await review.call("POST", "/reviews/pills", token, {"questionIds": list(question_ids)})
    assert r.status_code == 200, r.text
    pills_: dict[str, Any] = r.json()["pills"]
    return pills_


async def test_each_state_and_its_pill(review: Review, stub: AnthropicStub) -> None:
    pool = "pool-states"
    clean = await review.publish_version(pool_id=pool)
    found = await review.publish_version(pool_id=pool)
    failed = await review.publish_version(pool_id=pool)
    never = await review.publish_version(pool_id=pool)

    script_findings(stub)
    r = await review_now(review, clean["questionId"])
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "clean" and r.json()["findings"] == []

    script_findings(
        stub,
        finding(
            "choices.0.correct",
            "error",
            "Sydney n'est pas la capitale.",
            {"from": "true", "to": "false"},
        ),
        finding("prompt", "notice", "  Espace superflu.  "),
    )
    r = await review_now(review, found["questionId"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["state"] == "findings" and body["versionNumber"] == 1
    assert [f["severity"] for f in body["findings"]] == ["error", "notice"]
    assert body["findings"][0]["fix"] == {"from": "true", "to": "false"}
    assert body["findings"][1]["message"] == "Espace superflu."

    # A provider failure: Review now says llm_failed and leaves no row (no pill).
    stub.script(StubReply.error(500))
    r = await review_now(review, failed["questionId"])
    assert r.status_code == 502 and r.json()["code"] == "llm_failed"

    got = await pills(
        review,
        pool,
        clean["questionId"],
        found["questionId"],
        failed["questionId"],
        never["questionId"],
        "q-unknown",
    )
    assert got[clean["questionId"]] == {"state": "clean", "count": 0, "worst": None}
    assert got[found["questionId"]] == {"state": "findings", "count": 2, "worst": "error"}
    assert failed["questionId"] not in got and never["questionId"] not in got
    assert "q-unknown" not in got

    # Ignore: the whole review; the pill reads "LLM reviewed", the tab drops it.
    r = await review.call(
        "POST",
        f"/questions/{found['questionId']}/review/ignore",
        review.contributor(found["questionId"]),
    )
    assert r.status_code == 200 and r.json()["state"] == "ignored"
    got = await pills(review, pool, found["questionId"])
    assert got[found["questionId"]] == {"state": "ignored", "count": 0, "worst": None}

    viewer = review.token({f"pool:{pool}": {"role": "viewer"}})
    tab = (await review.call("GET", f"/pools/{pool}/reviews", viewer)).json()
    assert tab == {"enabled": False, "reviewed": 2, "pending": 2, "items": []}


async def test_failed_row_from_a_request_and_its_pill(review: Review, stub: AnthropicStub) -> None:
    """A request whose call fails records `failed` (retried the next night): pill failed."""
    pool = "pool-failed"
    v = await review.publish_version(pool_id=pool)
    stub.script(StubReply.error(500))
    await review.publish(
        "review.v1.requests",
        {"questionId": v["questionId"], "versionId": v["versionId"], "user": None},
        f"req-{v['versionId']}",
    )

    async def failed() -> bool:
        row = await review.service.repo.review_of(v["versionId"])
        return row is not None and row.state.value == "failed"

    await eventually(failed, "the failed row")
    got = await pills(review, pool, v["questionId"])
    assert got[v["questionId"]] == {"state": "failed", "count": 0, "worst": None}


async def test_tab_lists_open_findings_of_latest_versions(
    review: Review, stub: AnthropicStub
) -> None:
    pool = "pool-tab"
    q = await review.publish_version(pool_id=pool)
    script_findings(stub, finding("prompt", "warn", "Ambigu."))
    assert (await review_now(review, q["questionId"])).status_code == 200
    owner = review.token({f"pool:{pool}": {"role": "owner"}})
    r = await review.call("PUT", f"/pools/{pool}/review", owner, {"enabled": True})
    assert r.status_code == 200, r.text
    tab = r.json()
    assert tab["enabled"] is True and tab["reviewed"] == 1 and tab["pending"] == 0
    assert tab["items"][0]["questionId"] == q["questionId"]
    assert tab["items"][0]["review"]["findings"][0]["message"] == "Ambigu."

    # A newer version has no row: it is pending, and the old version's findings leave the tab.
    await review.publish_version(question_id=q["questionId"], pool_id=pool, version_number=2)
    tab = (await review.call("GET", f"/pools/{pool}/reviews", owner)).json()
    assert tab["items"] == [] and tab["reviewed"] == 0 and tab["pending"] == 1

    r = await review.call("PUT", f"/pools/{pool}/review", owner, {"enabled": False})
    assert r.json()["enabled"] is False


async def test_fix_undo_and_fix_stale_on_the_draft(review: Review, stub: AnthropicStub) -> None:
    config = mcq("Le resultat de 2 + 2 est ?")
    v = await review.publish_version(pool_id="pool-fix", config=config, explanation="Car 2+2=4.")
    qid = v["questionId"]
    script_findings(
        stub,
        finding("prompt", "notice", "Accent.", {"from": "resultat", "to": "résultat"}),
        finding(
            "choices.1.correct", "error", "Canberra est juste.", {"from": "false", "to": "true"}
        ),
        finding("explanation", "warn", "Pas de fix."),
    )
    assert (await review_now(review, qid)).status_code == 200
    token = review.contributor(qid)

    async def fix(index: int, draft: dict[str, Any], undo: bool = False, **extra: Any) -> Any:
        body = {
            "finding": index,
            "undo": undo,
            "config": draft,
            "explanation": "Car 2+2=4.",
            **extra,
        }
        return await review.call("POST", f"/questions/{qid}/review/fix", token, body)

    draft = copy.deepcopy(config)
    r = await fix(0, draft)
    assert r.status_code == 200, r.text
    fixed = r.json()
    assert fixed["config"]["prompt"] == "Le résultat de 2 + 2 est ?"
    assert fixed["review"]["findings"][0]["applied"] is True
    assert len(fixed["draftHash"]) == 64

    # Fix again: already applied → fix_stale; Undo on the draft that holds the fix.
    r = await fix(0, fixed["config"])
    assert r.status_code == 409 and r.json()["code"] == "fix_stale"
    r = await fix(0, fixed["config"], undo=True)
    assert r.status_code == 200, r.text
    assert r.json()["config"]["prompt"] == config["prompt"]
    assert r.json()["review"]["findings"][0]["applied"] is False
    r = await fix(0, config, undo=True)  # Undo of what is not applied
    assert r.status_code == 409 and r.json()["code"] == "fix_stale"

    # A tick.
    r = await fix(1, draft)
    assert r.status_code == 200 and r.json()["config"]["choices"][1]["correct"] is True

    # The draft moved on: the text no longer holds `from` exactly once.
    moved = copy.deepcopy(config)
    moved["prompt"] = "Le resultat ou le resultat ?"
    r = await fix(0, moved)
    assert r.status_code == 409 and r.json()["code"] == "fix_stale"
    # The stored flag did not change on a refused fix.
    stored = await review.service.repo.review_of(v["versionId"])
    assert stored is not None and [f.applied for f in stored.findings] == [False, True, False]

    r = await fix(2, draft)
    assert r.status_code == 400 and r.json()["code"] == "no_fix"
    r = await fix(7, draft)
    assert r.status_code == 400 and r.json()["code"] == "no_fix"
    r = await fix(0, draft, versionNumber=9)
    assert r.status_code == 409 and r.json()["code"] == "fix_stale"

    # A new published version without a review: no_review; nothing published ever changed.
    await review.publish_version(
        question_id=qid, pool_id="pool-fix", version_number=2, config=config
    )
    r = await fix(0, draft)
    assert r.status_code == 400 and r.json()["code"] == "no_review"
    old = await review.service.repo.version(v["versionId"])
    assert old is not None and old.config == config


async def test_refusals_before_any_call(review_sqlite: Review, stub: AnthropicStub) -> None:
    review = review_sqlite
    circuit = await review.publish_version(type="circuit", config={"configVersion": 1})
    r = await review_now(review, circuit["questionId"])
    assert r.status_code == 400 and r.json()["code"] == "review_unsupported"
    r = await review.call(
        "POST",
        f"/questions/{circuit['questionId']}/review/fix",
        review.contributor(circuit["questionId"]),
        {"finding": 0, "config": {}},
    )
    assert r.json()["code"] == "review_unsupported"

    r = await review_now(review, "q-never-published")
    assert r.status_code == 400 and r.json()["code"] == "not_published"
    r = await review.call(
        "POST",
        "/questions/q-never-published/review/fix",
        review.contributor("q-never-published"),
        {"finding": 0, "config": {}},
    )
    assert r.status_code == 400 and r.json()["code"] == "not_published"

    plain = await review.publish_version()
    r = await review.call(
        "POST",
        f"/questions/{plain['questionId']}/review/ignore",
        review.contributor(plain["questionId"]),
    )
    assert r.status_code == 400 and r.json()["code"] == "no_review"
    assert stub.requests == []


async def test_access(review_sqlite: Review, stub: AnthropicStub) -> None:
    review = review_sqlite
    v = await review.publish_version(pool_id="pool-acl")
    qid = v["questionId"]
    viewer = review.token({f"question:{qid}": {"role": "viewer"}})
    other = review.token({"question:other": {"role": "owner"}})
    for token in (viewer, other):
        r = await review_now(review, qid, token)
        assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await review.call("POST", f"/questions/{qid}/review", None)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    # Contributor on the pool reaches the question.
    script_findings(stub)
    r = await review_now(review, qid, review.token({"pool:pool-acl": {"role": "contributor"}}))
    assert r.status_code == 200, r.text
    # The tab needs a grant on the pool; the switch needs owner.
    r = await review.call("GET", "/pools/pool-acl/reviews", other)
    assert r.status_code == 404
    contributor = review.token({"pool:pool-acl": {"role": "contributor"}})
    r = await review.call("PUT", "/pools/pool-acl/review", contributor, {"enabled": True})
    assert r.status_code == 404
    # A pill is only for who reaches the pool (or the question).
    r = await review.call("POST", "/reviews/pills", other, {"questionIds": [qid]})
    assert r.status_code == 200 and r.json() == {"pills": {}}
    r = await review.call("POST", "/reviews/pills", viewer, {"questionIds": [qid]})
    assert r.json()["pills"][qid]["state"] == "clean"
    # Bad bodies answer JSON errors.
    r = await review.call("POST", "/reviews/pills", viewer, {"questionIds": []})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


async def test_review_now_is_the_teachers_call_and_rate_limited(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    review = review_sqlite
    v = await review.publish_version()
    token = review.token({f"question:{v['questionId']}": {"role": "contributor"}}, sub="prof-42")
    stub.script(*[StubReply.tool({"findings": []}) for _ in range(12)])
    # Eleven clicks, each its own Idempotency-Key (as the platform sends one per click).
    codes = [
        (await review_now(review, v["questionId"], token, key=f"click-{i}")).status_code
        for i in range(11)
    ]
    # The gateway's per-person limit of purpose review (10 a minute, like the wand).
    assert codes[:10] == [200] * 10 and codes[10] == 429
    usage = await review.service.llm.usage(billed_to="prof-42")
    assert usage.billed_to_spend is not None
    assert usage.billed_to_spend[Purpose.review].calls == 10


async def test_review_now_sent_again_is_answered_from_the_paid_call(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    """The same click sent again (its Idempotency-Key, or no key and the same request) is the
    same call: answered from the gateway's stored reply, not paid again. (Before issue 20 each
    Review now was a call of its own, request id none.)"""
    review = review_sqlite
    v = await review.publish_version()
    token = review.token({f"question:{v['questionId']}": {"role": "contributor"}}, sub="prof-43")
    stub.script(*[StubReply.tool({"findings": []}) for _ in range(4)])
    for key in ("click-a", "click-a", None, None):
        r = await review_now(review, v["questionId"], token, key=key)
        assert r.status_code == 200, r.text
    assert len(stub.requests) == 2  # click-a once, the keyless request once
    usage = await review.service.llm.usage(billed_to="prof-43")
    assert usage.billed_to_spend is not None
    assert usage.billed_to_spend[Purpose.review].calls == 2


async def test_openapi_lists_the_routes_with_their_error_codes(review_sqlite: Review) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
        doc = (await http.get(f"{review_sqlite.url}/openapi.json")).json()
    paths = doc["paths"]
    fix = paths["/app/api/questions/{question_id}/review/fix"]["post"]["responses"]
    assert "no_fix" in fix["400"]["description"] and "fix_stale" in fix["409"]["description"]
    now = paths["/app/api/questions/{question_id}/review"]["post"]["responses"]
    assert "rate_limited" in now["429"]["description"] and "llm_failed" in now["502"]["description"]
    assert (
        "not_found"
        in paths["/app/api/pools/{pool_id}/reviews"]["get"]["responses"]["404"]["description"]
    )
    assert set(paths) >= {
        "/app/api/pools/{pool_id}/review",
        "/app/api/reviews/pills",
        "/app/api/questions/{question_id}/review/ignore",
    }
