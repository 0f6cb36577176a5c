"""`review.v1.lint` and `POST /app/api/pools/{id}/review/lint` end to end (issue 30): the review
served on a locked nats-server, connected as its own bus user; the platform and editor-assist
request the lint, another service may not; the HTTP route takes the same body with the tab's
grant. No model is called."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import LintReply, LintRequest
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect

from .conftest import Review, running_review

pytestmark = pytest.mark.integration

FLAWED: dict[str, Any] = {
    "configVersion": 2,
    "prompt": "Welches Tier ist kein Säugetier?",
    "choices": [
        {"text": "Hund", "correct": False},
        {"text": "Wal", "correct": False},
        {"text": "Pinguin", "correct": True},
        {"text": "Keine der genannten", "correct": False},
    ],
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
}


@pytest.fixture
async def locked(
    tmp_path: Path, signing_keys: SigningKeys
) -> AsyncIterator[tuple[NatsServer, Review]]:
    server = NatsServer(tmp_path / "nats").start()
    try:
        async with running_review(
            server.url,
            signing_keys,
            f"sqlite:///{tmp_path / 'r.db'}",
            nats_credentials_dir=str(server.credentials_dir),
        ) as review:
            yield server, review
    finally:
        server.stop()


async def lint_as(server: NatsServer, user: str, body: LintRequest) -> LintReply:
    nc = await nats_connect(server.url_for(user))
    try:
        return await request(nc, subjects.REVIEW_LINT, body, LintReply, timeout=10)
    finally:
        await nc.close()


async def test_the_platform_and_the_wand_lint_over_nats(
    locked: tuple[NatsServer, Review],
) -> None:
    server, _ = locked
    body = LintRequest(type="mcq", language="de", config=FLAWED)
    for user in ("platform", "editor-assist"):
        reply = await lint_as(server, user, body)
        assert [(f.code, f.criterion, f.path) for f in reply.findings] == [
            ("iwf.none_of_the_above", 3, "choices.3"),
            ("iwf.negative_stem", 19, "prompt"),
        ], user
        assert reply.checked == [3, 4, 6, 9, 10, 11, 12, 14, 16, 17, 19]
        assert all(f.severity == "notice" for f in reply.findings)
        assert reply.findings[1].message.startswith("Der Fragestamm ist verneint")


async def test_refusals_over_nats(locked: tuple[NatsServer, Review]) -> None:
    server, _ = locked
    with pytest.raises(ContractError) as e:
        await lint_as(server, "platform", LintRequest(type="short", language="fr", config={}))
    assert e.value.code is ErrorCode.lint_unsupported
    broken = {**FLAWED, "choices": [{"text": "Hund", "correct": True}]}
    with pytest.raises(ContractError) as e:
        await lint_as(server, "platform", LintRequest(type="mcq", language="de", config=broken))
    assert e.value.code is ErrorCode.draft_invalid
    assert any(p["path"] == "choices" for p in (e.value.details or {})["problems"])
    # Another language: the language-free criteria, said in `checked`.
    reply = await lint_as(server, "platform", LintRequest(type="mcq", language="es", config=FLAWED))
    assert reply.checked == [4, 10, 16] and reply.findings == []


async def test_a_service_without_the_right_is_refused(locked: tuple[NatsServer, Review]) -> None:
    server, _ = locked
    nc = await nats_connect(server.url_for("lesson-fix"))
    try:
        body = LintRequest(type="mcq", language="de", config=FLAWED).model_dump_json().encode()
        with pytest.raises((NatsTimeoutError, NoRespondersError)):
            await nc.request(subjects.REVIEW_LINT, body, timeout=0.5)
    finally:
        await nc.close()
    assert any("review.v1.lint" in line for line in server.violations())


async def test_the_http_route_takes_the_same_body_with_the_tab_s_grant(
    locked: tuple[NatsServer, Review],
) -> None:
    _, review = locked
    body = {"type": "mcq", "language": "de", "config": FLAWED}
    viewer = review.token({"pool:pool-lint": {"role": "viewer"}})
    r = await review.call("POST", "/pools/pool-lint/review/lint", viewer, body)
    assert r.status_code == 200, r.text
    assert [f["code"] for f in r.json()["findings"]] == [
        "iwf.none_of_the_above",
        "iwf.negative_stem",
    ]
    # Another pool's grant, or none: the pool is out of reach.
    other = review.token({"pool:other": {"role": "owner"}})
    r = await review.call("POST", "/pools/pool-lint/review/lint", other, body)
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await review.call("POST", "/pools/pool-lint/review/lint", None, body)
    assert r.status_code == 401
    r = await review.call("POST", "/pools/pool-lint/review/lint", viewer, {**body, "type": "cloze"})
    assert r.status_code == 400 and r.json()["code"] == "lint_unsupported"
    r = await review.call(
        "POST", "/pools/pool-lint/review/lint", viewer, {**body, "config": {"prompt": 3}}
    )
    assert r.status_code == 422 and r.json()["code"] == "draft_invalid"
    r = await review.call("POST", "/pools/pool-lint/review/lint", viewer, {"type": "mcq"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    async with httpx.AsyncClient() as http:
        doc = (await http.get(f"{review.url}/openapi.json")).json()
    route = doc["paths"]["/app/api/pools/{pool_id}/review/lint"]["post"]
    assert "draft_invalid" in route["responses"]["422"]["description"]
    assert "lint_unsupported" in route["responses"]["400"]["description"]
