"""A replay costs nothing twice (issue 29, item 6): the real gateway, runner and editor-assist.

Twelve identical wand requests: one model call, one ledger row, and the teacher's code runs
once — the eleven replays are answered from the gateway's stored reply and the run kept beside
it (KV `generate_settled`), counted by the runner's own `/metrics`. They do not count against
the teacher's per-minute limit either. And one person's runs at once are bounded
(EDITOR_ASSIST_RUNNER_PER_PERSON): past it the wand answers with the proposal and
`runner_unavailable` ("busy"), while another teacher's run goes ahead.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts.questions.code import empty_code_draft
from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [{"name": f"e{i}", "stdin": f"{i}\n", "args": [], "visible": True} for i in range(6)]


def proposal(solution: str) -> StubReply:
    return StubReply.tool(
        {"proposal": {"referenceSolution": solution, "cases": CASES}, "explanation": ""}
    )


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"{name}(?:\{{(.*)\}})? (\S+)$", line)
        if match is None:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


async def scrape(url: str) -> str:
    async with httpx.AsyncClient(timeout=10) as http:
        return (await http.get(f"{url}/metrics")).text


def services(
    nats_url: str, tmp_path: Path, stub: AnthropicStub, **gateway: str
) -> tuple[ServiceProcess, ServiceProcess]:
    common = {"NATS_URL": nats_url, "QUIZ_DATA_DIR": str(tmp_path)}
    gateway_env = {
        **common,
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": stub.base_url,
        **gateway,
    }
    return (
        ServiceProcess("quiz_llm_gateway.main", gateway_env, tmp_path / "gateway.log"),
        ServiceProcess(
            "quiz_runner.main", {**common, "RUNNER_SLOTS": "2"}, tmp_path / "runner.log"
        ),
    )


async def wand(
    http: httpx.AsyncClient, url: str, keys: SigningKeys, teacher: str, statement: str
) -> dict[str, Any]:
    token = keys.mint(teacher, {"question:5": {"role": "owner", "type": "code"}})
    draft = {**empty_code_draft(), "prompt": statement, "language": "python"}
    r = await http.post(
        f"{url}/app/api/questions/5/generate",
        json={"config": draft},
        headers={"authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def test_twelve_identical_wand_requests_run_the_code_once(
    nats_url: str,
    nc: NATS,
    tmp_path: Path,
    signing_keys: SigningKeys,
    anthropic_stub: AnthropicStub,
) -> None:
    gateway, runner = services(
        nats_url, tmp_path, anthropic_stub, LLM_RATE_LIMITS='{"generate": 2}'
    )
    with gateway, runner:
        settings = Settings(nats_url=nats_url, jwks_file=str(signing_keys.jwks_path))
        async with serve_app(create_app(settings), settings) as url:
            teacher = f"t-{uuid.uuid4().hex[:6]}"
            anthropic_stub.script(
                proposal("print(int(input()) * 2)\n"), proposal("print(int(input()) * 3)\n")
            )
            before = metric(await scrape(runner.url), "quiz_runner_cases_total")
            async with httpx.AsyncClient(timeout=60) as http:
                first = await wand(http, url, signing_keys, teacher, "Double the number.")
                again = [
                    await wand(http, url, signing_keys, teacher, "Double the number.")
                    for _ in range(11)
                ]
                # The limit is 2 a minute: the replays took none of it.
                other = await wand(http, url, signing_keys, teacher, "Triple the number.")
            ran = metric(await scrape(runner.url), "quiz_runner_cases_total") - before
            assert len(anthropic_stub.requests) == 2  # the first draft once, then the other
            expected = [f"{2 * i}\n" for i in range(6)]
            for body in (first, *again):
                assert [c["expected"] for c in body["config"]["tests"]["cases"]] == expected
                assert body == first
            # The other draft was served (the limit had room: the replays took none of it).
            assert [c["expected"] for c in other["config"]["tests"]["cases"]] == [
                f"{3 * i}\n" for i in range(6)
            ]
            # The teacher's code ran for the first request and the other draft only.
            assert ran == 2 * len(CASES), ran
            ours = await scrape(url)
            assert metric(ours, "quiz_editor_assist_settle_runs_total", outcome="replayed") == 11
            assert metric(ours, "quiz_editor_assist_settle_runs_total", outcome="ok") == 2


async def test_one_person_runs_at_most_their_bound_at_once(
    nats_url: str,
    nc: NATS,
    tmp_path: Path,
    signing_keys: SigningKeys,
    anthropic_stub: AnthropicStub,
) -> None:
    gateway, runner = services(nats_url, tmp_path, anthropic_stub)
    slow = "import time\ntime.sleep(4)\nprint(input())\n"
    with gateway, runner:
        settings = Settings(
            nats_url=nats_url, jwks_file=str(signing_keys.jwks_path), runner_per_person=1
        )
        async with serve_app(create_app(settings), settings) as url:
            alice, bob = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
            anthropic_stub.script(proposal(slow))
            async with httpx.AsyncClient(timeout=60) as http:
                held = asyncio.create_task(wand(http, url, signing_keys, alice, "Echo, slowly."))
                for _ in range(400):  # until alice's run holds a runner slot
                    if metric(await scrape(runner.url), "quiz_runner_slots_busy") >= 1:
                        break
                    await asyncio.sleep(0.05)
                anthropic_stub.script(proposal("print(input())\n"), proposal("print(input())\n"))
                refused = await wand(http, url, signing_keys, alice, "Echo the line.")
                assert not held.done(), "alice's first run must still be running"
                allowed = await wand(http, url, signing_keys, bob, "Echo the line.")
                first = await held
            assert [i["code"] for i in refused["incomplete"]] == ["runner_unavailable"]
            assert "busy" in refused["incomplete"][0]["message"]
            assert refused["config"]["referenceSolution"].strip() == "print(input())"
            assert not allowed.get("incomplete"), allowed
            assert not first.get("incomplete"), first
