"""Fix with AI through HTTP: the real gateway process and the scripted model, a real siteverify
server, in the seed's order (size → verification → rate limit → checks once → two tries)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from quiz_contracts.lesson import MAX_FIX_BODY_BYTES, MAX_FIX_DOC_CHARS
from quiz_lesson_fix.domain.aifix import apply_fix_operations
from quiz_lesson_fix.domain.checks import validate_lesson
from quiz_lesson_fix.domain.fix import FIX_SCHEMA, lesson_json_chars, reduce_lesson
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.siteverify_stub import SiteverifyStub

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASE = "fr_grounding_single"
KEY = "E_GROUNDING_SINGLE:s1q2:TRAVAILLEUSES"
CHECKS = "quiz_lesson_fix_check_duration_seconds_count"


def edit(block_id: str, **fields: Any) -> dict[str, Any]:
    """One edit of FIX_SCHEMA: every field present, empty means keep."""
    empty = {"text": "", "words": [], "questionType": "", "prompt": "", "answer": ""}
    return {"blockId": block_id, **empty, "answers": [], "steps": [], **fields}


def reply(*edits: dict[str, Any], explanation: str = "Grounded the answer.") -> StubReply:
    return StubReply.tool({"explanation": explanation, "edits": list(edits)})


# The passage says "ouvrières"; the orange prompt quotes it too, so the answer alone would now
# be revealed by question 4: a whole fix rewords both.
HALF = reply(edit("s1q2", answer="ouvrières"))
GOOD = reply(
    edit("s1q2", answer="ouvrières"),
    edit("s1q4", prompt="Elles fabriquent ______. Nommez-en un."),
    explanation="  The answer is now the passage's word; question 4 no longer gives it away.  ",
)


def messages(stub: AnthropicStub, n: int) -> list[dict[str, Any]]:
    return stub.requests[n].body["messages"]


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


async def test_a_first_try_that_passes(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub, siteverify: Any
) -> None:
    lesson = lessons.case(CASE)
    stub.script(GOOD)
    r = await api.fix(author(), lesson, KEY, verification="tok-first")
    assert r.status_code == 200, r.text
    body = r.json()
    assert [op["blockId"] for op in body["operations"]] == ["s1q2", "s1q4"]
    assert all(op["op"] == "replace_block" for op in body["operations"])
    assert body["explanation"] == GOOD.payload["explanation"].strip()
    assert body["newWarnings"] == 0
    # The operations do what they claim on the lesson as sent.
    fixed = apply_fix_operations(lesson, body["operations"])
    assert validate_lesson(fixed).find(KEY) is None
    # One verification (our secret, the editor's token), one model call of FIX_SCHEMA.
    assert [(c.response, c.secret != "") for c in siteverify.calls] == [("tok-first", True)]
    assert len(stub.requests) == 1
    sent = stub.requests[0].body
    # The default model (claude-sonnet-5-5) takes the schema as output_config.format.
    assert sent["output_config"]["format"] == {"type": "json_schema", "schema": FIX_SCHEMA}
    first = text_of(messages(stub, 0)[0])
    assert '<problem code="E_GROUNDING_SINGLE">' in first
    assert '"travailleuses"' in first  # the checker's own message, naming the value
    assert '"editable": true' in first


async def test_a_failed_first_try_is_shown_to_the_model_and_the_second_passes(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    stub.script(HALF, GOOD)
    before = await api.metric('quiz_lesson_fix_fix_passed_total{attempt="2"}')
    r = await api.fix(author(), lessons.case(CASE), KEY)
    assert r.status_code == 200, r.text
    assert len(stub.requests) == 2
    second = messages(stub, 1)
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert "ouvrières" in text_of(second[1])  # its own first edits
    retry = text_of(second[2])
    assert "not accepted" in retry
    assert "E_ANSWER_REVEALED_CROSS" not in retry  # prose, not codes: the checker's message
    assert "question 4" in retry and "ouvrières" in retry  # what the first fix broke
    assert await api.metric('quiz_lesson_fix_fix_passed_total{attempt="2"}') == before + 1


async def test_both_tries_failing_is_a_422(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    stub.script(HALF, HALF)
    r = await api.fix(author(), lessons.case(CASE), KEY)
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "fix_failed"
    assert "No fix passed the lesson checks" in r.json()["message"]
    assert r.json()["details"]["problems"]
    assert len(stub.requests) == 2


async def test_a_stale_key_is_409_after_verification_and_before_any_model_call(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub, siteverify: Any
) -> None:
    r = await api.fix(author(), lessons.case(CASE), "E_GROUNDING_SINGLE:s1q2:GONE")
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "finding_gone"
    assert len(siteverify.calls) == 1
    assert stub.requests == []


async def test_a_finding_without_an_ai_fix_is_400(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    r = await api.fix(author(), lessons.case(CASE), "W_SECTION_COUNT:1")
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "no_ai_fix"
    assert stub.requests == []


def padded_to(lesson: dict[str, Any], chars: int, fill: str = "x") -> dict[str, Any]:
    """The lesson with its title lengthened to exactly `chars` characters of reduced JSON
    (UTF-16 units), with `fill` (one unit) and, for an odd remainder, "x"."""
    missing = chars - lesson_json_chars(reduce_lesson(lesson))
    lesson["title"] += fill * missing
    assert lesson_json_chars(reduce_lesson(lesson)) == chars
    return lesson


async def test_300001_characters_is_413_before_verification_is_called(
    api: Any, lessons: Any, author: Callable[..., str], siteverify: SiteverifyStub
) -> None:
    checks = await api.metric(CHECKS)
    r = await api.fix(author(), padded_to(lessons.case(CASE), MAX_FIX_DOC_CHARS + 1), KEY)
    assert r.status_code == 413, r.text
    assert r.json()["code"] == "lesson_too_large"
    assert r.json()["details"] == {"chars": MAX_FIX_DOC_CHARS + 1, "max": MAX_FIX_DOC_CHARS}
    assert siteverify.calls == []
    assert await api.metric(CHECKS) == checks
    # 300,000 exactly is within the limit: the request goes on to verification (and the checks).
    r = await api.fix(author(), padded_to(lessons.case(CASE), MAX_FIX_DOC_CHARS), "E_X:gone")
    assert r.status_code == 409, r.text
    assert len(siteverify.calls) == 1


async def test_a_lesson_escaped_as_ascii_is_measured_in_characters_not_bytes(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub, siteverify: Any
) -> None:
    """Issue 21 item 5: a client that escapes non-ASCII as `\\u` sequences sends up to six
    bytes a character; a lesson within 300,000 characters still passes the size check."""
    lesson = padded_to(lessons.case(CASE), MAX_FIX_DOC_CHARS, fill="é")
    lesson["title"] = lesson["title"][:-2] + "😀"  # two UTF-16 units, twelve bytes escaped
    assert lesson_json_chars(reduce_lesson(lesson)) == MAX_FIX_DOC_CHARS
    assert len(json.dumps({"lesson": lesson})) > 5 * MAX_FIX_DOC_CHARS  # what the old cap refused
    r = await api.fix(author(), lesson, "E_X:gone", ascii_only=True)
    assert (r.status_code, r.json()["code"]) == (409, "finding_gone"), r.text
    assert len(siteverify.calls) == 1
    # One character more, escaped the same way: refused on the size, before verification or any
    # model call.
    lesson["title"] += "é"
    r = await api.fix(author(), lesson, KEY, ascii_only=True)
    assert (r.status_code, r.json()["code"]) == (413, "lesson_too_large"), r.text
    assert r.json()["details"] == {"chars": MAX_FIX_DOC_CHARS + 1, "max": MAX_FIX_DOC_CHARS}
    assert len(siteverify.calls) == 1
    assert stub.requests == []


async def test_the_lesson_is_measured_reduced_an_inline_image_does_not_count(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    lesson = lessons.case(CASE)
    picture = {"id": "s1img", "type": "image", "image": "data:image/png;base64," + "A" * 400_000}
    lesson["sections"][0]["blocks"].insert(0, picture)
    assert len(json.dumps(lesson)) > MAX_FIX_DOC_CHARS
    stub.script(GOOD)
    r = await api.fix(author(), lesson, KEY)
    assert r.status_code == 200, r.text
    first = text_of(messages(stub, 0)[0])
    assert "AAAA" not in first and '"type": "image"' in first
    assert '"editable": false' in first


async def test_a_body_over_the_routes_maximum_is_413_before_the_token_is_read(
    api: Any, lessons: Any
) -> None:
    lesson = lessons.case(CASE)
    lesson["title"] = "x" * MAX_FIX_BODY_BYTES
    r = await api.post("fix", None, {"lesson": lesson, "key": KEY})
    assert r.status_code == 413, r.text
    assert r.json()["code"] == "payload_too_large"


async def test_a_failed_verification_is_refused_before_the_checks_run(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub, siteverify: Any
) -> None:
    checks = await api.metric(CHECKS)
    r = await api.fix(author(), lessons.case(CASE), KEY, verification="fail-bot")
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "verification_failed"
    # A token used twice is refused too (single-use), and a down verifier is a 502.
    bearer = author()
    assert (await api.fix(bearer, lessons.case(CASE), "E_X:gone", "tok-once")).status_code == 409
    r = await api.fix(bearer, lessons.case(CASE), KEY, "tok-once")
    assert (r.status_code, r.json()["code"]) == (403, "verification_failed")
    assert "expired or was already used" in r.json()["message"]
    siteverify.status = 503
    r = await api.fix(author(), lessons.case(CASE), KEY)
    assert (r.status_code, r.json()["code"]) == (502, "verification_unavailable")
    # Only the one request that passed verification ran the checks; no model was called.
    assert await api.metric(CHECKS) == checks + 1
    assert stub.requests == []


async def test_an_edit_outside_the_section_is_refused_and_retried(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    lesson = lessons.with_second_section(lessons.case(CASE))
    stub.script(reply(edit("s2q1", answer="ouvrières")), GOOD)
    r = await api.fix(author(), lesson, KEY)
    assert r.status_code == 200, r.text
    assert {op["blockId"] for op in r.json()["operations"]} == {"s1q2", "s1q4"}
    retry = text_of(messages(stub, 1)[2])
    assert 'names block "s2q1", which is not in this section' in retry
    # Both tries outside the section: nothing passes.
    stub.script(reply(edit("s2t1", text="Autre texte.")), reply(edit("nowhere", answer="x")))
    r = await api.fix(author(), lesson, KEY)
    assert (r.status_code, r.json()["code"]) == (422, "fix_failed")


FOOTNOTED = (
    "Les abeilles vivent dans une RUCHE.^[@manuel, p. 12] Les ouvrières fabriquent de la cire, "
    "du miel, et de la propolis."
)


async def test_a_fix_that_drops_a_footnote_fails_check_fix(
    api: Any, lessons: Any, author: Callable[..., str], stub: AnthropicStub
) -> None:
    lesson = lessons.with_document(lessons.case(CASE), "s1t1", FOOTNOTED)
    lesson["sources"] = [{"id": "manuel", "title": "Manuel de biologie"}]
    reworded = "Les abeilles vivent dans une RUCHE. Les travailleuses fabriquent de la cire, "
    reworded += "du miel, et de la propolis."
    kept = reworded.replace("RUCHE.", "RUCHE.^[@manuel, p. 12]")
    stub.script(reply(edit("s1t1", text=reworded)), reply(edit("s1t1", text=kept)))
    r = await api.fix(author(), lesson, KEY)
    assert r.status_code == 200, r.text
    retry = text_of(messages(stub, 1)[2])
    assert "drops a footnote" in retry
    (op,) = r.json()["operations"]
    assert op["block"]["text"] == kept
    first = text_of(messages(stub, 0)[0])
    assert "^[@manuel, p. 12]" in first  # the model saw the passage as markup
    # Dropping it on both tries: 422.
    stub.script(reply(edit("s1t1", text=reworded)), reply(edit("s1t1", text=reworded)))
    r = await api.fix(author(), lesson, KEY)
    assert (r.status_code, r.json()["code"]) == (422, "fix_failed")
    assert any("footnote" in p for p in r.json()["details"]["problems"])


async def test_the_check_route_answers_every_finding_with_its_key(
    api: Any, lessons: Any, author: Callable[..., str], siteverify: Any
) -> None:
    r = await api.check(author(role="viewer"), lessons.case(CASE))
    assert r.status_code == 200, r.text
    body = r.json()
    assert [f["key"] for f in body["errors"]] == [KEY]
    assert {f["code"] for f in body["warnings"]} == {"W_QUESTION_SHAPE", "W_SECTION_COUNT"}
    finding = body["errors"][0]
    assert (finding["section"], finding["sectionId"], finding["blockId"]) == (1, "s1", "s1q2")
    assert siteverify.calls == []  # the checks are not a model call: no verification
    r = await api.check(author(), padded_to(lessons.case(CASE), MAX_FIX_DOC_CHARS + 1))
    assert (r.status_code, r.json()["code"]) == (413, "lesson_too_large")


async def test_grants(api: Any, lessons: Any, author: Callable[..., str]) -> None:
    lesson = lessons.case(CASE)
    assert (await api.fix(None, lesson, KEY)).status_code == 401
    r = await api.fix(author(grants={"question:1": {"role": "owner"}}), lesson, KEY)
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    viewer = author(role="viewer")
    assert (await api.check(viewer, lesson)).status_code == 200
    assert (await api.fix(viewer, lesson, KEY)).status_code == 404
    assert (await api.check(author(grants={}), lesson)).status_code == 404


async def test_a_malformed_lesson_is_invalid_request(api: Any, author: Callable[..., str]) -> None:
    bad = {"title": "", "sections": [{"id": "s", "blocks": [{"id": "b", "type": "table"}]}]}
    r = await api.fix(author(), bad, KEY)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    r = await api.post("fix", author(), {"lesson": {"title": "no sections"}, "key": KEY})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
