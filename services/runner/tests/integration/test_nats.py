"""The runner as a NATS micro service: run, runner_busy at once, $SRV discovery, /slots, /readyz."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import (
    MAX_REPLY_BYTES,
    RunCase,
    RunFile,
    RunLimits,
    RunReply,
    RunRequest,
)
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_runner.config import Settings
from quiz_runner.main import create_app
from quiz_runner.uids import claim_uids
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.serving import serve_app

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]


def py_request(source: str, *cases: RunCase) -> RunRequest:
    return RunRequest(
        language="python",
        files=[RunFile(path="main.py", content=source)],
        cases=list(cases) or [RunCase(name="only")],
        limits=RunLimits(wall_s=5),
    )


@pytest.fixture
async def runner_url(
    nats_url: str, state_dir: Path, signing_keys: SigningKeys, test_uid_range: dict[str, int]
) -> AsyncIterator[str]:
    settings = Settings(
        nats_url=nats_url,
        jwks_file=str(signing_keys.jwks_path),
        state_dir=str(state_dir / "service"),
        slots=1,
        **test_uid_range,  # its own claim, from the tests' range
        busy_retry_after_s=0.75,
    )
    async with serve_app(create_app(settings), settings) as url:
        yield url


async def test_run_over_nats(runner_url: str, nc: NATS) -> None:
    req = py_request(
        "import sys\nprint(sys.stdin.read().upper(), end='')\nsys.exit(2)\n",
        RunCase(name="a", stdin="abc"),
        RunCase(name="b", stdin="xyz"),
    )
    reply = await request(nc, subjects.RUNNER_RUN, req, RunReply, timeout=30)
    assert reply.compile.ok and reply.backend == "bwrap"
    assert [(c.name, c.stdout, c.exit_code) for c in reply.cases] == [
        ("a", "ABC", 2),
        ("b", "XYZ", 2),
    ]


async def test_compile_failed_is_a_reply(runner_url: str, nc: NATS) -> None:
    reply = await request(
        nc, subjects.RUNNER_RUN, py_request("def broken(:\n"), RunReply, timeout=30
    )
    assert not reply.compile.ok and "SyntaxError" in reply.compile.output
    assert reply.cases == []


async def test_busy_is_answered_at_once(
    runner_url: str, nc: NATS, signing_keys: SigningKeys
) -> None:
    """With the only slot taken, the next request is refused with runner_busy, not queued."""
    slow = asyncio.create_task(
        request(
            nc, subjects.RUNNER_RUN, py_request("import time\ntime.sleep(2)"), RunReply, timeout=30
        )
    )
    ops = signing_keys.mint("ops-1", {"ops": {"role": "viewer"}})
    async with httpx.AsyncClient(
        base_url=runner_url, headers={"authorization": f"Bearer {ops}"}
    ) as http:
        teacher = signing_keys.mint("teacher-1", {"question:1": {"role": "owner"}})
        hidden = await http.get("/slots", headers={"authorization": f"Bearer {teacher}"})
        assert hidden.status_code == 404
        for _ in range(200):
            if (await http.get("/slots")).json()["busy"] == 1:
                break
            await asyncio.sleep(0.02)
        slots = (await http.get("/slots")).json()
        assert slots["total"] == 1 and slots["busy"] == 1 and slots["free"] == 0
        with pytest.raises(ContractError) as err:
            await request(nc, subjects.RUNNER_RUN, py_request("print(1)"), RunReply, timeout=30)
        assert err.value.code is ErrorCode.runner_busy
        assert err.value.retry_after_s == 0.75
        assert not slow.done()  # the refusal did not wait for the slot
        assert (await slow).cases[0].exit_code == 0
        metrics = (await http.get("/metrics")).text
        assert 'quiz_runner_requests_total{language="python",outcome="runner_busy"} 1.0' in metrics
        assert "quiz_runner_slots 1.0" in metrics
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"]["sandbox"] is True
        isolation = ready.json()["details"]["isolation"]
        assert isolation["mode"] == "per-slot uids" and "weaker" not in isolation


async def test_refusals_over_nats(runner_url: str, nc: NATS) -> None:
    over = py_request("print(1)").model_copy(update={"limits": RunLimits(wall_s=3600)})
    with pytest.raises(ContractError) as err:
        await request(nc, subjects.RUNNER_RUN, over, RunReply, timeout=30)
    assert err.value.code is ErrorCode.limit_exceeded
    cobol = py_request("print(1)").model_copy(update={"language": "cobol"})
    with pytest.raises(ContractError) as err:
        await request(nc, subjects.RUNNER_RUN, cobol, RunReply, timeout=30)
    assert err.value.code is ErrorCode.unsupported_language


async def test_listed_by_srv_ping(runner_url: str, nc: NATS) -> None:
    msg = await nc.request("$SRV.INFO.runner", b"", timeout=5)
    info = json.loads(msg.data)
    assert info["name"] == "runner"
    assert [e["subject"] for e in info["endpoints"]] == [subjects.RUNNER_RUN]


def test_a_runner_whose_uids_are_taken_refuses_to_start(
    nats_url: str, state_dir: Path, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    """Two runners on one host: the second finds the range claimed and says so, then exits."""
    first = 1_900_000_100
    held = claim_uids(1, first, 1, tmp_path)  # the other runner's claim
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "JWKS_FILE": str(signing_keys.jwks_path),
        "RUNNER_STATE_DIR": str(state_dir / "refused"),
        "RUNNER_SLOTS": "1",
        "RUNNER_UID_BASE": str(first),
        "RUNNER_UID_RANGE": "1",
        "RUNNER_UID_LOCK_DIR": str(tmp_path),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "quiz_runner.main"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        held.release()
    assert done.returncode != 0
    assert f"need 1 free slot uids in {first}..{first}" in done.stderr
    assert "1 claimed by another runner" in done.stderr


async def test_the_bus_takes_what_the_contract_allows(runner_url: str, nc: NATS) -> None:
    """The testkit's nats-server, like every NATS we ship, takes NATS_MAX_PAYLOAD."""
    assert nc.max_payload == NATS_MAX_PAYLOAD


async def test_outputs_at_the_documented_maxima_come_back(runner_url: str, nc: NATS) -> None:
    """20 cases of 60,000 bytes of stdout (each under the 64 KiB default): all of it, exactly."""
    src = "import sys\nn = int(sys.argv[1])\nsys.stdout.write(chr(97 + n % 26) * 60000)\n"
    cases = [RunCase(name=f"c{i}", args=[str(i)]) for i in range(20)]
    reply = await request(nc, subjects.RUNNER_RUN, py_request(src, *cases), RunReply, timeout=120)
    assert [c.stdout for c in reply.cases] == [chr(97 + i % 26) * 60000 for i in range(20)]
    assert all(c.completed for c in reply.cases)


async def test_stdin_at_the_documented_maxima_reaches_the_program(
    runner_url: str, nc: NATS
) -> None:
    """5 cases of 250 KB of stdin (each under the 256 KiB maximum): one 1.25 MB request."""
    src = "import sys, hashlib\nprint(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n"
    stdins = [chr(65 + i) * 250_000 for i in range(5)]
    cases = [RunCase(name=f"c{i}", stdin=stdin) for i, stdin in enumerate(stdins)]
    reply = await request(nc, subjects.RUNNER_RUN, py_request(src, *cases), RunReply, timeout=120)
    expected = [hashlib.sha256(stdin.encode()).hexdigest() + "\n" for stdin in stdins]
    assert [c.stdout for c in reply.cases] == expected


async def test_a_reply_over_one_message_is_cut_to_fit(runner_url: str, nc: NATS) -> None:
    """100 cases printing 64 KiB on stdout and stderr (13 MB): the reply fits in one message.

    The first cases come back whole; once their outputs fill the reply, the next ones come
    back cut (reply_cut, prefixes of what they printed) with their status intact; nothing is
    refused after the work was done.
    """
    src = "import sys\nsys.stdout.write('o' * 65536)\nsys.stderr.write('e' * 65536)\nsys.exit(3)\n"
    cases = [RunCase(name=f"case-{i}") for i in range(100)]
    req = py_request(src, *cases).model_copy(update={"limits": RunLimits(wall_s=10)})
    msg = await nc.request(subjects.RUNNER_RUN, req.model_dump_json().encode(), timeout=300)
    assert len(msg.data) <= MAX_REPLY_BYTES
    reply = RunReply.model_validate_json(msg.data)
    assert [c.name for c in reply.cases] == [f"case-{i}" for i in range(100)]
    assert all(c.exit_code == 3 and c.timed_out is None for c in reply.cases)
    whole = [c for c in reply.cases if not c.reply_cut]
    cut = [c for c in reply.cases if c.reply_cut]
    assert whole and cut and reply.cases[: len(whole)] == whole  # whole ones first
    assert all(c.stdout == "o" * 65536 and c.stderr == "e" * 65536 for c in whole)
    assert all(not c.completed for c in cut)
    assert all(set(c.stdout) <= {"o"} and set(c.stderr) <= {"e"} for c in cut)
    assert len(whole) * 2 * 65536 < MAX_REPLY_BYTES
