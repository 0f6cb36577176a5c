"""The wand through HTTP: a real NATS, the real gateway and runner processes, the scripted model."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from quiz_contracts.generate import draft_hash
from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.code import (
    CASE_EXPECTED_MAX,
    CASE_STDIN_MAX,
    CODE_MAX_CASES,
    empty_code_draft,
)
from quiz_contracts.questions.common import PROMPT_MAX
from quiz_contracts.questions.program import FILE_CONTENT_MAX, REFERENCE_MAX
from quiz_editor_assist.config import Settings
from quiz_editor_assist.generators.registry import generated_types
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


@pytest.fixture(scope="module")
def runner(nats_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    d = tmp_path_factory.mktemp("runner")
    env = {"NATS_URL": nats_url, "QUIZ_DATA_DIR": str(d)}
    proc = ServiceProcess("quiz_runner.main", env, d / "runner.log")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def wand(
    nats_url: str, signing_keys: SigningKeys, llm_gateway: ServiceProcess, runner: ServiceProcess
) -> AsyncIterator[str]:
    settings = Settings(nats_url=nats_url, jwks_file=str(signing_keys.jwks_path))
    async with serve_app(create_app(settings), settings) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_stub(stub: AnthropicStub) -> None:
    stub.reset()


def teacher_token(
    keys: SigningKeys, qtype: str, question: str = "42", role: str = "contributor"
) -> str:
    # A fresh teacher per test: the gateway's 10/min per teacher must not couple tests.
    sub = f"teacher-{uuid.uuid4().hex[:8]}"
    return keys.mint(sub, {f"question:{question}": {"role": role, "type": qtype, "pool": "7"}})


async def post_generate(
    url: str, token: str, body: dict[str, Any], question: str = "42", key: str | None = None
) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"}
    if key is not None:
        headers["idempotency-key"] = key
    async with httpx.AsyncClient(timeout=120) as http:
        return await http.post(
            f"{url}/app/api/questions/{question}/generate", json=body, headers=headers
        )


def last_request_body(stub: AnthropicStub) -> dict[str, Any]:
    """The last request the model received."""
    return stub.requests[-1].body


MCQ_DRAFT = {
    "configVersion": 2,
    "prompt": "Quelle est la capitale de la Suisse ?",
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
    "choices": [{"text": "Berne", "correct": True}, {"text": "", "correct": False}],
}


def wand_output(proposal: dict[str, Any], explanation: str = "", **extra: Any) -> StubReply:
    """The model's tool input: the type's proposal beside the explanation."""
    return StubReply.tool({"proposal": proposal, "explanation": explanation, **extra})


async def test_mcq_fills_the_empty_row_and_demotes_a_second_key(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(
        wand_output(
            {
                "choices": [
                    {"text": "Zurich", "correct": True},  # a second key in single mode
                    {"text": "Genève", "correct": False},
                    {"text": " berne", "correct": False},  # already written: never repeated
                ],
                "prompt": "REWRITTEN",  # outside the narrow schema: no effect
                "mode": "multiple",
            },
            "Berne est la ville fédérale.",
        )
    )
    r = await post_generate(
        wand, teacher_token(signing_keys, "mcq"), {"config": MCQ_DRAFT, "explanation": ""}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["choices"] == [
        {"text": "Berne", "correct": True},
        {"text": "Zurich", "correct": False},  # demoted: the teacher's tick wins
        {"text": "Genève", "correct": False},
    ]
    assert {**body["config"], "choices": MCQ_DRAFT["choices"]} == MCQ_DRAFT
    assert body["explanation"] == "Berne est la ville fédérale."
    assert body["draft_hash"] == draft_hash(MCQ_DRAFT, "")
    assert body["incomplete"] is None
    sent = last_request_body(stub)
    # The default model (claude-sonnet-5-5) takes the schema as output_config.format, no tool.
    assert "tool_choice" not in sent and sent["output_config"]["format"]["type"] == "json_schema"
    schema = sent["output_config"]["format"]["schema"]
    assert set(schema["properties"]) == {"proposal", "explanation"}
    assert set(schema["properties"]["proposal"]["properties"]) == {"choices"}


async def test_statement_empty_is_refused_before_any_model_call(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {**MCQ_DRAFT, "prompt": " \u3000"}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": draft})
    assert r.status_code == 422
    assert r.json()["code"] == "statement_empty"
    assert stub.requests == []


async def test_a_statement_over_the_platforms_limit_costs_nothing(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {**MCQ_DRAFT, "prompt": "x" * (PROMPT_MAX + 1)}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": draft})
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "limit_exceeded"
    assert f"{PROMPT_MAX:,}" in r.json()["message"]
    assert stub.requests == []


async def test_a_draft_over_its_types_budget_costs_nothing(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    budget = question_type("mcq").budget
    draft = {**MCQ_DRAFT, "junk": "x" * (budget.text + 1)}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": draft})
    assert (r.status_code, r.json()["code"]) == (422, "limit_exceeded")
    draft = {**MCQ_DRAFT, "junk": [0] * (budget.values + 1)}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": draft})
    assert (r.status_code, r.json()["code"]) == (422, "limit_exceeded")
    assert stub.requests == []


async def test_a_draft_that_does_not_read_as_the_grants_type_is_draft_invalid(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    """Issue 22 item 5: both answered 200 — a hybrid mcq+short config, or the draft unchanged."""
    # An mcq draft under a grant of type short.
    r = await post_generate(wand, teacher_token(signing_keys, "short"), {"config": MCQ_DRAFT})
    assert (r.status_code, r.json()["code"]) == (422, "draft_invalid"), r.text
    assert "configVersion: Input should be 3" in r.json()["message"]
    assert {"path": "configVersion", "message": "Input should be 3"} in r.json()["details"][
        "problems"
    ]
    # An mcq draft whose choices are not a list.
    oops = {**MCQ_DRAFT, "choices": "oops"}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": oops})
    assert (r.status_code, r.json()["code"]) == (422, "draft_invalid"), r.text
    assert r.json()["details"]["problems"] == [
        {"path": "choices", "message": "Input should be a valid list"}
    ]
    assert stub.requests == []  # refused before the model is paid


async def test_a_valid_draft_too_large_for_the_nats_hop_is_a_contract_error(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    # The largest code question the platform accepts (~1.3 MB) does not fit one NATS message of
    # a bus at nats-server's default max_payload (1 MiB; ours is larger): the wand reads the
    # limit from its connection and says so, as JSON, before the model is paid, instead of a
    # 500 from the bus.
    small_bus = NatsServer(tmp_path / "nats", max_payload=1024 * 1024).start()
    settings = Settings(nats_url=small_bus.url, jwks_file=str(signing_keys.jwks_path))
    draft = {
        **empty_code_draft(),
        "prompt": "Sum.",
        "language": "python",
        "referenceSolution": "r" * REFERENCE_MAX,
        "template": "",
        "files": [{"name": f"f{i}.txt", "content": "c" * FILE_CONTENT_MAX} for i in range(4)],
    }
    draft["tests"]["cases"] = [
        {"name": f"c{i}", "stdin": "s" * CASE_STDIN_MAX, "expected": "e" * CASE_EXPECTED_MAX}
        for i in range(CODE_MAX_CASES)
    ]
    assert question_type("code").validate(draft)
    try:
        async with serve_app(create_app(settings), settings) as wand:
            r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": draft})
    finally:
        small_bus.stop()
    assert r.status_code == 422, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["code"] == "limit_exceeded"
    assert "message bus" in r.json()["message"]
    assert stub.requests == []


async def test_short_rich_categorize_merge_through_http(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    short = {
        "configVersion": 3,
        "prompt": "Date de la prise de la Bastille ?",
        "kind": "date",
        "matchers": [{"kind": "date", "value": "", "toleranceDays": 0, "points": 1}],
    }
    stub.script(wand_output({"answers": [{"value": "1789-07-14"}, {"value": "14 juillet 1789"}]}))
    r = await post_generate(wand, teacher_token(signing_keys, "short"), {"config": short})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["matchers"] == [
        {"kind": "date", "value": "1789-07-14", "toleranceDays": 0, "points": 1}
    ]

    rich = {"configVersion": 1, "prompt": "Explain photosynthesis.", "rubric": "Mine."}
    stub.script(wand_output({"reference": "Plants turn light into sugar.", "rubric": "Theirs."}))
    r = await post_generate(wand, teacher_token(signing_keys, "rich"), {"config": rich})
    assert r.status_code == 200, r.text
    assert r.json()["config"] == {**rich, "reference": "Plants turn light into sugar."}

    categorize = {
        "configVersion": 1,
        "prompt": "Sort the animals.",
        "columns": [{"id": "col1aaaa", "label": "Mammals", "cards": ["dog1aaaa"]}],
        "cards": [{"id": "dog1aaaa", "text": "Dog"}],
    }
    stub.script(
        wand_output(
            {
                "columns": [
                    {"label": "Mammals", "cards": ["Cat", "Dog"]},
                    {"label": "Birds", "cards": ["Eagle"]},
                ],
                "distractors": ["Rock"],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "categorize"), {"config": categorize})
    assert r.status_code == 200, r.text
    config = r.json()["config"]
    assert [c["label"] for c in config["columns"]] == ["Mammals", "Birds"]
    text = {c["id"]: c["text"] for c in config["cards"]}
    assert [text[i] for i in config["columns"][0]["cards"]] == ["Dog", "Cat"]
    assert [text[i] for i in config["columns"][1]["cards"]] == ["Eagle"]
    assert [c["text"] for c in config["cards"]].count("Dog") == 1
    assert read_draft("categorize", config).valid


CODE_DRAFT = {
    **empty_code_draft(),
    "prompt": "Read two integers and print their sum.",
    "language": "python",
}


async def test_code_reference_that_does_not_compile_comes_back_incomplete(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {**CODE_DRAFT, "language": "c"}
    stub.script(
        wand_output(
            {
                "referenceSolution": "int main( { return 0 }",
                "cases": [{"name": "one", "stdin": "", "args": [], "visible": True}],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": draft})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["referenceSolution"] == "int main( { return 0 }"
    assert [i["code"] for i in body["incomplete"]] == ["compile_failed"]


async def test_code_case_that_times_out_keeps_its_empty_output(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(
        wand_output(
            {
                "referenceSolution": "import sys\nline = sys.stdin.read()\n"
                "while line == 'loop\\n':\n    pass\nprint('ok')\n",
                "cases": [
                    {"name": "fine", "stdin": "x\n", "args": [], "visible": True},
                    {"name": "forever", "stdin": "loop\n", "args": [], "visible": False},
                ],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    body = r.json()
    cases = {c["name"]: c for c in body["config"]["tests"]["cases"]}
    assert cases["fine"]["expected"] == "ok\n"
    assert cases["forever"]["expected"] == ""
    assert [i["code"] for i in body["incomplete"]] == ["partial"]


async def test_invalid_merged_draft_is_not_run(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    # A case proposed without a name leaves the placeholder; its blank name keeps the draft
    # invalid, so settle must not run.
    stub.script(wand_output({"referenceSolution": "print(1)", "cases": []}))
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    assert [i["code"] for i in r.json()["incomplete"]] == ["draft_invalid"]


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (StubReply.error(500), 502, "llm_failed"),
        (StubReply.malformed_tool({"proposal": {"choices": "not a list"}}), 502, "llm_failed"),
    ],
)
async def test_gateway_failures_map_to_the_seed_codes(
    wand: str,
    stub: AnthropicStub,
    signing_keys: SigningKeys,
    reply: StubReply,
    status: int,
    code: str,
) -> None:
    stub.script(reply, reply)  # an unreadable reply is asked once more
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": MCQ_DRAFT})
    assert r.status_code == status, r.text
    assert r.json()["code"] == code


async def test_rate_limited_at_the_eleventh_call_in_a_minute(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.default = wand_output({"choices": [{"text": "Bâle", "correct": False}]})
    token = teacher_token(signing_keys, "mcq")
    codes = []
    for i in range(11):
        # Eleven clicks, each its own Idempotency-Key (as the platform sends one per click).
        r = await post_generate(wand, token, {"config": MCQ_DRAFT}, key=f"click-{i}")
        codes.append(r.status_code)
    assert codes[:10] == [200] * 10
    assert codes[10] == 429
    assert r.json()["code"] == "rate_limited"
    assert int(r.headers["retry-after"]) >= 1


async def test_the_same_request_sent_again_is_not_paid_again(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    """A retry of the same request (its Idempotency-Key again, or without one the same
    person, route and body) is answered from the gateway's stored reply: one provider request
    for each. (Before issue 20 each request had a fresh `generate-<uuid>` id.)"""
    stub.default = wand_output({"choices": [{"text": "Bâle", "correct": False}]})
    token = teacher_token(signing_keys, "mcq")
    for key in ("click-a", "click-a", None, None):
        r = await post_generate(wand, token, {"config": MCQ_DRAFT}, key=key)
        assert r.status_code == 200, r.text
    assert len(stub.requests) == 2
    # Another draft is another request.
    other = {**MCQ_DRAFT, "prompt": "Une autre question ?"}
    assert (await post_generate(wand, token, {"config": other})).status_code == 200
    assert len(stub.requests) == 3


async def test_access_and_the_type_come_from_the_grant(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    # A viewer, or a teacher of another question, gets the 404 of a missing question.
    viewer = teacher_token(signing_keys, "mcq", role="viewer")
    r = await post_generate(wand, viewer, {"config": MCQ_DRAFT})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    other = teacher_token(signing_keys, "mcq", question="43")
    r = await post_generate(wand, other, {"config": MCQ_DRAFT})
    assert r.status_code == 404
    # The grant says rich: the draft is read as rich whatever it looks like.
    stub.script(wand_output({"reference": "R", "rubric": "G"}))
    r = await post_generate(
        wand, teacher_token(signing_keys, "rich"), {"config": {"prompt": "Discuss."}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["config"]["reference"] == "R"


async def test_availability(wand: str, signing_keys: SigningKeys) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.get(
            f"{wand}/app/api/generate/availability",
            headers={"authorization": f"Bearer {teacher_token(signing_keys, 'mcq')}"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["available"] is True
        assert set(r.json()["types"]) == {"mcq", "short", "rich", "categorize", "code", "codeimage"}
        r = await http.get(f"{wand}/app/api/generate/availability")
        assert r.status_code == 401


async def test_the_openapi_documents_each_type_the_error_body_and_the_bearer_scheme(
    wand: str, signing_keys: SigningKeys
) -> None:
    async with httpx.AsyncClient() as http:
        spec = (await http.get(f"{wand}/openapi.json")).json()
        docs = await http.get(f"{wand}/docs")
        asset = await http.get(f"{wand}/docs-assets/swagger-ui-bundle.js")
    operation = spec["paths"]["/app/api/questions/{id}/generate"]["post"]
    schemas = spec["components"]["schemas"]
    config = schemas["GenerateRequest"]["properties"]["config"]
    named = [ref["$ref"].rsplit("/", 1)[1] for ref in config["oneOf"]]
    assert named == [f"{name}Config" for name in ("Categorize", "Code", "CodeImage", "Mcq")] + [
        "RichConfig",
        "ShortConfig",
    ]
    assert "configVersion" in schemas["McqConfig"]["properties"]
    for status in ("400", "401", "404", "409", "413", "422", "429", "502"):
        body = operation["responses"][status]["content"]["application/json"]["schema"]
        assert body["$ref"] == "#/components/schemas/ErrorBody", status
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert operation["security"] == [{"bearer": []}]
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(spec)))
    assert refs <= set(schemas), refs - set(schemas)
    # Swagger's prefilled body (the first example) is a valid draft of the grant it names:
    # "Try it out" with that token completes it (issue 34: it was a categorize draft, 422).
    examples = operation["requestBody"]["content"]["application/json"]["examples"]
    assert next(iter(examples)) == "mcq" and set(examples) == set(generated_types())
    for name, example in examples.items():
        # Fresh drafts (partial by design, D16) in the type's current config version.
        version = question_type(name).config_version
        assert example["value"]["config"]["configVersion"] == version, name
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), examples["mcq"]["value"])
    assert r.status_code == 200, r.text
    # Swagger UI works offline: the page loads its assets from the service itself.
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert "cdn." not in docs.text and "https://" not in docs.text
    assert asset.status_code == 200 and len(asset.content) > 100_000


async def test_runner_unavailable_leaves_the_merge_incomplete(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys, runner: ServiceProcess
) -> None:
    # Last in the module: it stops the runner.
    runner.stop()
    stub.script(
        wand_output(
            {
                "referenceSolution": "print(input())\n",
                "cases": [{"name": "echo", "stdin": "hi\n", "args": [], "visible": True}],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["referenceSolution"].strip() == "print(input())"
    assert body["config"]["tests"]["cases"][0]["expected"] == ""
    assert [i["code"] for i in body["incomplete"]] == ["runner_unavailable"]


async def test_an_idempotency_key_sent_again_with_another_body_is_422(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    """Issue 29 item 10: one's own Idempotency-Key again with another draft is the caller's
    mistake — 422 `idempotency_key_reused`, naming no internal id (it answered 502 llm_failed
    with the request id) — and nothing is paid for it."""
    stub.default = wand_output({"choices": [{"text": "Bâle", "correct": False}]})
    token = teacher_token(signing_keys, "mcq")
    first = await post_generate(wand, token, {"config": MCQ_DRAFT}, key="click-reused")
    assert first.status_code == 200, first.text
    other = {**MCQ_DRAFT, "prompt": "Une autre question ?"}
    r = await post_generate(wand, token, {"config": other}, key="click-reused")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["code"] == "idempotency_key_reused"
    for internal in ("generate:", "key:", "request_id", "click-reused"):
        assert internal not in body["message"], body["message"]
    assert len(stub.requests) == 1
