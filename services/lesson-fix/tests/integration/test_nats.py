"""lesson.v1.check and lesson.v1.fix for other services: a real NATS, the real gateway process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.lesson import MAX_FIX_DOC_CHARS, CheckReply, CheckRequest, FixCall, FixReply
from quiz_lesson_fix.domain.fix import lesson_json_chars, reduce_lesson
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.siteverify_stub import SiteverifyStub

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASE = "fr_grounding_single"
KEY = "E_GROUNDING_SINGLE:s1q2:TRAVAILLEUSES"
EMPTY = {"text": "", "words": [], "questionType": "", "prompt": "", "answers": [], "steps": []}
GOOD = StubReply.tool(
    {
        "explanation": "Grounded.",
        "edits": [
            {**EMPTY, "blockId": "s1q2", "answer": "ouvrières"},
            {
                **EMPTY,
                "blockId": "s1q4",
                "answer": "",
                "prompt": "Elles font ______. Nommez-en un.",
            },
        ],
    }
)


async def test_check_over_nats(service_url: str, nc: NATS, lessons: Any) -> None:
    body = CheckRequest.model_validate({"lesson": lessons.case(CASE)})
    reply = await request(nc, subjects.LESSON_CHECK, body, CheckReply, timeout=30)
    assert [f.key for f in reply.errors] == [KEY]


async def test_fix_over_nats_is_for_the_named_person_without_verification(
    service_url: str, nc: NATS, lessons: Any, stub: AnthropicStub, siteverify: SiteverifyStub
) -> None:
    stub.script(GOOD)
    call = FixCall.model_validate({"lesson": lessons.case(CASE), "key": KEY, "user": "t-nats"})
    reply = await request(nc, subjects.LESSON_FIX, call, FixReply, timeout=60)
    assert [op.blockId for op in reply.operations] == ["s1q2", "s1q4"]
    assert siteverify.calls == []
    assert len(stub.requests) == 1


async def test_the_same_fix_sent_again_is_not_paid_again(
    service_url: str, nc: NATS, lessons: Any, stub: AnthropicStub
) -> None:
    """The caller's retry of the same request (same person, subject and body) names the same
    model call: answered from the gateway's stored reply (before issue 20 each try had a fresh
    `lesson-fix-<uuid>` id, and the retry was paid again). An Idempotency-Key names another."""
    stub.script(GOOD, GOOD)
    call = FixCall.model_validate({"lesson": lessons.case(CASE), "key": KEY, "user": "t-again"})
    first = await request(nc, subjects.LESSON_FIX, call, FixReply, timeout=60)
    again = await request(nc, subjects.LESSON_FIX, call, FixReply, timeout=60)
    assert again == first and len(stub.requests) == 1
    keyed = await nc.request(
        subjects.LESSON_FIX,
        call.model_dump_json(by_alias=True).encode(),
        timeout=60,
        headers={"Idempotency-Key": "click-2"},
    )
    assert FixReply.model_validate_json(keyed.data).operations == first.operations
    assert len(stub.requests) == 2


async def test_nats_errors_are_the_same_codes(service_url: str, nc: NATS, lessons: Any) -> None:
    stale = FixCall.model_validate({"lesson": lessons.case(CASE), "key": "E_X:1", "user": "t-n2"})
    with pytest.raises(ContractError) as gone:
        await request(nc, subjects.LESSON_FIX, stale, FixReply, timeout=30)
    assert gone.value.code == ErrorCode.finding_gone
    big = lessons.case(CASE)
    big["title"] += "x" * (MAX_FIX_DOC_CHARS + 1 - lesson_json_chars(reduce_lesson(big)))
    call = FixCall.model_validate({"lesson": big, "key": KEY, "user": "t-n2"})
    with pytest.raises(ContractError) as large:
        await request(nc, subjects.LESSON_FIX, call, FixReply, timeout=30)
    assert large.value.code == ErrorCode.lesson_too_large
    # A request without its person is refused by the contract.
    bad = json.dumps({"lesson": lessons.case(CASE), "key": KEY}).encode()
    answer = await nc.request(subjects.LESSON_FIX, bad, timeout=30)
    assert json.loads(answer.data)["code"] == "invalid_request"


async def test_the_service_registers_both_endpoints(service_url: str, nc: NATS) -> None:
    info = json.loads((await nc.request("$SRV.INFO.lesson-fix", b"", timeout=5)).data)
    assert {e["subject"] for e in info["endpoints"]} == {subjects.LESSON_CHECK, subjects.LESSON_FIX}
    assert info["metadata"]["http_url"] == service_url


async def test_an_idempotency_key_sent_again_with_another_lesson_is_refused(
    service_url: str, nc: NATS, lessons: Any, stub: AnthropicStub
) -> None:
    """Issue 29 item 10: one's own Idempotency-Key again with another body answers
    `idempotency_key_reused` (422 over HTTP), naming no internal id; nothing is paid for it."""
    stub.script(GOOD, GOOD)
    lesson = lessons.case(CASE)
    call = FixCall.model_validate({"lesson": lesson, "key": KEY, "user": "t-reuse"})
    headers = {"Idempotency-Key": "click-reused"}
    first = await nc.request(
        subjects.LESSON_FIX,
        call.model_dump_json(by_alias=True).encode(),
        timeout=60,
        headers=headers,
    )
    FixReply.model_validate_json(first.data)
    other = FixCall.model_validate(
        {"lesson": {**lesson, "title": lesson["title"] + " (bis)"}, "key": KEY, "user": "t-reuse"}
    )
    answer = await nc.request(
        subjects.LESSON_FIX,
        other.model_dump_json(by_alias=True).encode(),
        timeout=60,
        headers=headers,
    )
    body = json.loads(answer.data)
    assert body["code"] == "idempotency_key_reused", body
    assert "lesson-fix:" not in body["message"] and "key:" not in body["message"]
    assert len(stub.requests) == 1
