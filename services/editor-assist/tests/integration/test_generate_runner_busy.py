"""A full runner: the merged draft comes back with incomplete runner_unavailable (the seed has
no runner_busy among its incomplete codes; the platform maps RunnerBusy the same way)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.questions.code import empty_code_draft
from quiz_contracts.runner import RunCase, RunFile, RunLimits, RunReply, RunRequest
from quiz_editor_assist.config import Settings
from quiz_editor_assist.main import create_app
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLEEPER = RunRequest(
    language="python",
    files=[RunFile(path="main.py", content="import time\ntime.sleep(8)\n")],
    cases=[RunCase(name="hold the slot")],
    limits=RunLimits(wall_s=12),
)


async def test_busy_runner_leaves_the_outputs_to_compute(
    nats_url: str,
    nc: NATS,
    tmp_path: Path,
    signing_keys: SigningKeys,
    anthropic_stub: AnthropicStub,
) -> None:
    common = {"NATS_URL": nats_url, "QUIZ_DATA_DIR": str(tmp_path)}
    gateway_env = {
        **common,
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": anthropic_stub.base_url,
    }
    runner_env = {**common, "RUNNER_SLOTS": "1"}
    with (
        ServiceProcess("quiz_llm_gateway.main", gateway_env, tmp_path / "gateway.log"),
        ServiceProcess("quiz_runner.main", runner_env, tmp_path / "runner.log"),
    ):
        settings = Settings(nats_url=nats_url, jwks_file=str(signing_keys.jwks_path))
        async with serve_app(create_app(settings), settings) as url:
            holder = asyncio.create_task(
                request(nc, subjects.RUNNER_RUN, SLEEPER, RunReply, timeout=20)
            )
            await asyncio.sleep(1.0)  # the sleeper has the only slot
            case = {"name": "e", "stdin": "hi\n", "args": [], "visible": True}
            proposal = {"referenceSolution": "print(input())\n", "cases": [case]}
            anthropic_stub.script(StubReply.tool({"proposal": proposal, "explanation": ""}))
            token = signing_keys.mint(
                f"t-{uuid.uuid4().hex[:6]}", {"question:5": {"role": "owner", "type": "code"}}
            )
            draft = {**empty_code_draft(), "prompt": "Echo the line.", "language": "python"}
            async with httpx.AsyncClient(timeout=60) as http:
                r = await http.post(
                    f"{url}/app/api/questions/5/generate",
                    json={"config": draft},
                    headers={"authorization": f"Bearer {token}"},
                )
            assert not holder.done(), "the slot must still be held when the wand calls"
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["config"]["referenceSolution"].strip() == "print(input())"
            assert body["config"]["tests"]["cases"][0]["expected"] == ""
            assert [i["code"] for i in body["incomplete"]] == ["runner_unavailable"]
            assert "busy" in body["incomplete"][0]["message"]
            assert (await holder).cases[0].exit_code == 0
