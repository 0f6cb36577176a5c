"""The wand through HTTP: a real NATS, the real gateway and runner processes, the scripted model."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from quiz_contracts.generate import draft_hash
from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def stub(anthropic_stub_server: AnthropicStub) -> AnthropicStub:
    return anthropic_stub_server


@pytest.fixture(scope="module")
def gateway(
    nats_url: str, stub: AnthropicStub, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    d = tmp_path_factory.mktemp("gateway")
    env = {
        "NATS_URL": nats_url,
        "DATABASE_URL": f"sqlite+aiosqlite:///{d / 'gateway.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": stub.base_url,
        "LLM_GATEWAY_PROVIDER_MAX_RETRIES": "0",
        "QUIZ_DATA_DIR": str(d),
    }
    with ServiceProcess("quiz_llm_gateway.main", env, d / "gateway.log") as proc:
        yield proc


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
    nats_url: str, signing_keys: SigningKeys, gateway: ServiceProcess, runner: ServiceProcess
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
    url: str, token: str, body: dict[str, Any], question: str = "42"
) -> httpx.Response:
    async with httpx.AsyncClient(timeout=120) as http:
        return await http.post(
            f"{url}/app/api/questions/{question}/generate",
            json=body,
            headers={"authorization": f"Bearer {token}"},
        )


def last_request_body(stub: AnthropicStub) -> dict[str, Any]:
    """The last request the model received."""
    return stub.requests[-1].body


MCQ_DRAFT = {
    "prompt": "Quelle est la capitale de la Suisse ?",
    "mode": "single",
    "shuffle": True,
    "choices": [
        {"id": "a", "text": "Berne", "correct": True},
        {"id": "b", "text": "", "correct": False},
    ],
}


async def test_mcq_fills_the_empty_row_and_demotes_a_second_key(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(
        StubReply.tool(
            {
                "choices": [
                    {"text": "Zurich", "correct": True},  # a second key in single mode
                    {"text": "Genève", "correct": False},
                    {"text": "Berne", "correct": False},  # already written: never repeated
                ],
                "explanation": "Berne est la ville fédérale.",
                "prompt": "REWRITTEN",  # outside the narrow schema: no effect
                "mode": "multiple",
            }
        )
    )
    r = await post_generate(
        wand, teacher_token(signing_keys, "mcq"), {"config": MCQ_DRAFT, "explanation": ""}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    choices = body["config"]["choices"]
    assert choices[0] == {"id": "a", "text": "Berne", "correct": True}
    assert choices[1]["id"] == "b" and choices[1]["text"] == "Zurich"
    assert choices[1]["correct"] is False  # demoted: the teacher's tick wins
    assert [c["text"] for c in choices] == ["Berne", "Zurich", "Genève"]
    assert body["config"]["prompt"] == MCQ_DRAFT["prompt"]
    assert body["config"]["mode"] == "single"
    assert body["explanation"] == "Berne est la ville fédérale."
    assert body["draft_hash"] == draft_hash(MCQ_DRAFT, "")
    assert body["incomplete"] is None
    sent = last_request_body(stub)
    assert sent["tool_choice"]["type"] == "tool"
    schema = sent["tools"][0]["input_schema"]
    assert "prompt" not in schema.get("properties", {})
    assert "mode" not in schema.get("properties", {})


async def test_item_wand_fills_one_empty_choice_and_refuses_a_written_one(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    token = teacher_token(signing_keys, "mcq")
    stub.script(StubReply.tool({"text": "Lausanne", "correct": False}))
    r = await post_generate(wand, token, {"config": MCQ_DRAFT, "explanation": "", "item": 1})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["choices"][1]["text"] == "Lausanne"
    r = await post_generate(wand, token, {"config": MCQ_DRAFT, "explanation": "", "item": 0})
    assert r.status_code == 422
    assert r.json()["code"] == "item_not_empty"


async def test_statement_empty_is_refused_before_any_model_call(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {**MCQ_DRAFT, "prompt": "  "}
    r = await post_generate(wand, teacher_token(signing_keys, "mcq"), {"config": draft})
    assert r.status_code == 422
    assert r.json()["code"] == "statement_empty"
    assert stub.requests == []


async def test_short_rich_categorize_merge_through_http(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    short = {
        "prompt": "Date de la prise de la Bastille ?",
        "kind": "date",
        "matchers": [{"id": "m1", "kind": "date", "value": ""}],
    }
    stub.script(StubReply.tool({"values": ["1789-07-14", "14 juillet 1789"]}))
    r = await post_generate(wand, teacher_token(signing_keys, "short"), {"config": short})
    assert r.status_code == 200, r.text
    matchers = r.json()["config"]["matchers"]
    assert [(m["kind"], m["value"]) for m in matchers] == [("date", "1789-07-14")]

    rich = {"prompt": "Explain photosynthesis.", "reference": "", "rubric": "Mine."}
    stub.script(StubReply.tool({"reference": "Plants turn light into sugar.", "rubric": "Theirs."}))
    r = await post_generate(wand, teacher_token(signing_keys, "rich"), {"config": rich})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["reference"] == "Plants turn light into sugar."
    assert r.json()["config"]["rubric"] == "Mine."

    categorize = {
        "prompt": "Sort the animals.",
        "columns": [{"id": "c1", "label": "Mammals"}],
        "cards": [{"id": "k1", "text": "Dog", "column_id": "c1"}],
    }
    stub.script(
        StubReply.tool(
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
    labels = [c["label"] for c in config["columns"]]
    assert labels == ["Mammals", "Birds"]
    by_text = {c["text"]: c["column_id"] for c in config["cards"]}
    assert by_text["Dog"] == "c1" and by_text["Cat"] == "c1"
    assert by_text["Rock"] is None
    assert [c["text"] for c in config["cards"]].count("Dog") == 1


CODE_DRAFT = {
    "prompt": "Read two integers and print their sum.",
    "language": "python",
    "template": "",
    "reference": "",
    "cases": [{"name": "", "stdin": "", "args": [], "expected_stdout": ""}],
}


async def test_code_settles_outputs_on_the_runner(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(
        StubReply.tool(
            {
                "reference": "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
                "sys.exit(3 if a + b < 0 else 0)\n",
                "cases": [
                    {"name": "small", "stdin": "1 2\n"},
                    {"name": "negative", "stdin": "-5 1\n"},
                ],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    body = r.json()
    cases = {c["name"]: c for c in body["config"]["cases"]}
    assert set(cases) == {"small", "negative"}  # the empty placeholder case went
    assert cases["small"]["expected_stdout"] == "3\n"
    assert cases["negative"]["expected_stdout"] == "-4\n"
    assert cases["negative"]["expected_exit_code"] == 3
    assert body["incomplete"] is None


async def test_code_reference_that_does_not_compile_comes_back_incomplete(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {**CODE_DRAFT, "language": "c"}
    stub.script(StubReply.tool({"reference": "int main( { return 0 }", "cases": [{"name": "one"}]}))
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": draft})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["reference"] == "int main( { return 0 }"
    assert [i["code"] for i in body["incomplete"]] == ["compile_failed"]


async def test_code_case_that_times_out_keeps_its_empty_output(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    stub.script(
        StubReply.tool(
            {
                "reference": "import sys\nline = sys.stdin.read()\n"
                "while line == 'loop\\n':\n    pass\nprint('ok')\n",
                "cases": [{"name": "fine", "stdin": "x\n"}, {"name": "forever", "stdin": "loop\n"}],
            }
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    body = r.json()
    cases = {c["name"]: c for c in body["config"]["cases"]}
    assert cases["fine"]["expected_stdout"] == "ok\n"
    assert cases["forever"]["expected_stdout"] == ""
    assert [i["code"] for i in body["incomplete"]] == ["partial"]


async def test_invalid_merged_draft_is_not_run(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    # No reference proposed and none written: the merged draft is invalid, settle must not run.
    stub.script(StubReply.tool({"cases": [{"name": "one", "stdin": "1 2\n"}]}))
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    assert [i["code"] for i in r.json()["incomplete"]] == ["draft_invalid"]


async def test_codeimage_drawn_picture_becomes_the_target(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys
) -> None:
    draft = {
        "prompt": "Draw a red square on white.",
        "language": "python",
        "reference": "",
        "width": 4,
        "height": 3,
        "target": None,
    }
    reference = (
        "import sys\nw, h = 4, 3\nsys.stdout.buffer.write(b'P6 %d %d 255\\n' % (w, h))\n"
        "sys.stdout.buffer.write(bytes([255, 0, 0]) * (w * h))\n"
    )
    stub.script(StubReply.tool({"reference": reference}))
    r = await post_generate(wand, teacher_token(signing_keys, "codeimage"), {"config": draft})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["incomplete"] is None, body
    target = body["config"]["target"]
    assert (target["width"], target["height"]) == (4, 3)
    assert target["data"]


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (StubReply.error(500), 502, "llm_failed"),
        (StubReply.malformed_tool({"choices": "not a list"}), 502, "llm_failed"),
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
    stub.default = StubReply.tool({"choices": [{"text": "Bâle", "correct": False}]})
    token = teacher_token(signing_keys, "mcq")
    codes = []
    for _ in range(11):
        r = await post_generate(wand, token, {"config": MCQ_DRAFT})
        codes.append(r.status_code)
    assert codes[:10] == [200] * 10
    assert codes[10] == 429
    assert r.json()["code"] == "rate_limited"
    assert int(r.headers["retry-after"]) >= 1


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
    stub.script(StubReply.tool({"reference": "R", "rubric": "G"}))
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


async def test_runner_unavailable_leaves_the_merge_incomplete(
    wand: str, stub: AnthropicStub, signing_keys: SigningKeys, runner: ServiceProcess
) -> None:
    # Last in the module: it stops the runner.
    runner.stop()
    stub.script(
        StubReply.tool(
            {"reference": "print(input())\n", "cases": [{"name": "echo", "stdin": "hi\n"}]}
        )
    )
    r = await post_generate(wand, teacher_token(signing_keys, "code"), {"config": CODE_DRAFT})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["config"]["reference"].strip() == "print(input())"
    assert body["config"]["cases"][0]["expected_stdout"] == ""
    assert [i["code"] for i in body["incomplete"]] == ["runner_unavailable"]
