"""The runner as a NATS micro service: run, runner_busy at once, $SRV discovery, /slots, /readyz."""

from __future__ import annotations

import asyncio
import base64
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
    MAX_ARGS,
    MAX_CASES,
    MAX_CASES_WIRE_BYTES,
    MAX_FILE_BYTES_IN,
    MAX_FILES,
    MAX_FILES_WIRE_BYTES,
    MAX_REPLY_BYTES,
    MAX_STDIN_BYTES,
    RunCase,
    RunFile,
    RunLimits,
    RunReply,
    RunRequest,
    SlotsReply,
    max_output_bytes,
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
        # The contract's shape, field for field (SlotsReply), and OpenAPI names it.
        assert set(slots) == set(SlotsReply.model_fields)
        assert SlotsReply.model_validate(slots).sandbox_ready is True
        assert "python" in slots["languages"]
        openapi = (await http.get("/openapi.json")).json()
        answer = openapi["paths"]["/slots"]["get"]["responses"]["200"]["content"]
        assert answer["application/json"]["schema"]["$ref"].endswith("/SlotsReply")
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
        if os.geteuid() == 0:
            assert isolation["mode"] == "per-slot uids" and "weaker" not in isolation
        else:  # `make test` as a normal user: the runner says what is weaker then
            assert isolation["mode"] == "rootless" and isolation["weaker"], isolation


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


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a runner without root claims no uid: every slot runs as its user"
)
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


INPUTS_PROGRAM = """
import hashlib, os, sys
paths = sorted(os.path.join(r, n)[2:] for r, _, names in os.walk(".") for n in names)
files = hashlib.sha256()
for path in paths:
    files.update(path.encode() + b"\\0" + open(path, "rb").read())
case = hashlib.sha256(sys.stdin.buffer.read() + "\\0".join(sys.argv[1:]).encode())
print(files.hexdigest(), case.hexdigest())
"""


async def test_a_request_at_the_input_maxima_reaches_the_program(runner_url: str, nc: NATS) -> None:
    """32 files filling MAX_FILES_WIRE_BYTES (one of 256 KiB of binary, the rest control
    characters: 6 bytes of JSON each) and 100 cases filling MAX_CASES_WIRE_BYTES (one with
    256 KiB of stdin and 16 KiB of args): one message of ~7.5 MB over the locked bus, and every
    byte reaches the program."""
    binary = bytes(range(256)) * (MAX_FILE_BYTES_IN // 256)
    files = [
        RunFile(path="main.py", content=INPUTS_PROGRAM),
        RunFile(path="data/blob.bin", content=base64.b64encode(binary).decode(), encoding="base64"),
    ]
    room = MAX_FILES_WIRE_BYTES - sum(len(f.model_dump_json()) for f in files) - 4096
    for i in range(MAX_FILES - 2):
        files.append(RunFile(path=f"data/t{i:02d}.txt", content=chr(1 + i % 8) * (room // 30 // 6)))
    first = RunCase(name="big", stdin="s" * MAX_STDIN_BYTES, args=["a" * 256] * MAX_ARGS)
    room = MAX_CASES_WIRE_BYTES - len(first.model_dump_json()) - 4096
    cases = [first] + [
        RunCase(name=f"c{i}", stdin="\x02" * (room // 99 // 6 - 40), args=[str(i)])
        for i in range(MAX_CASES - 1)
    ]
    req = RunRequest(
        language="python",
        files=files,
        cases=cases,
        limits=RunLimits(wall_s=10, output_bytes=max_output_bytes(MAX_CASES)),
    )
    assert len(req.model_dump_json()) > 7 * 1024 * 1024
    reply = await request(nc, subjects.RUNNER_RUN, req, RunReply, timeout=600)
    tree = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        tree.update(f.path.encode() + b"\0" + f.content_bytes())
    expected = [
        f"{tree.hexdigest()} "
        f"{hashlib.sha256(c.stdin.encode() + chr(0).join(c.args).encode()).hexdigest()}\n"
        for c in cases
    ]
    assert [c.stdout for c in reply.cases] == expected, reply.cases[0]
    assert all(c.completed for c in reply.cases)


@pytest.mark.parametrize("cases", [1, MAX_CASES])
async def test_outputs_at_the_maxima_come_back_whole(runner_url: str, nc: NATS, cases: int) -> None:
    """Every case prints max_output_bytes of 0xff (the widest bytes on the wire: escaped text
    plus base64) on stdout and on stderr: 512 KiB each for one case, 5,242 each for 100. All of
    it comes back, exactly, nothing cut: 1 MiB of output in a reply of ~6.6 MB."""
    n = max_output_bytes(cases)
    src = (
        f"import sys\nsys.stdout.buffer.write(b'\\xff' * {n})\n"
        f"sys.stderr.buffer.write(b'\\xfe' * {n})\n"
    )
    req = py_request(src, *(RunCase(name=f"c{i}") for i in range(cases)))
    req = req.model_copy(update={"limits": RunLimits(wall_s=10, output_bytes=n)})
    msg = await nc.request(subjects.RUNNER_RUN, req.model_dump_json().encode(), timeout=600)
    assert len(msg.data) <= MAX_REPLY_BYTES
    reply = RunReply.model_validate_json(msg.data)
    assert len(reply.cases) == cases
    assert all(c.stdout_bytes() == b"\xff" * n for c in reply.cases)
    assert all(c.stderr_bytes() == b"\xfe" * n for c in reply.cases)
    assert all(c.completed and not c.reply_cut for c in reply.cases)


async def test_a_request_naming_no_limits_runs_at_every_allowed_case_count(
    runner_url: str, nc: NATS
) -> None:
    """Issue 34 item 7: 10 and 100 cases with no limits named (a raw JSON request, as another
    caller writes it) run, each at the most output that fits, and the reply says what was
    applied. Before, both were refused limit_exceeded (64 KiB × 2 × cases over 1 MiB)."""
    for cases in (10, MAX_CASES):
        body = {
            "language": "python",
            "files": [{"path": "main.py", "content": "print(input())\n"}],
            "cases": [{"name": f"c{i}", "stdin": f"{i}\n"} for i in range(cases)],
        }
        msg = await nc.request(subjects.RUNNER_RUN, json.dumps(body).encode(), timeout=120)
        assert not msg.headers or "Nats-Service-Error-Code" not in msg.headers, msg.data[:500]
        reply = RunReply.model_validate_json(msg.data)
        assert [c.stdout for c in reply.cases] == [f"{i}\n" for i in range(cases)]
        assert reply.limits is not None
        assert reply.limits.output_bytes == max_output_bytes(cases)  # 52,428 at 10, 5,242 at 100
        assert reply.limits.cpu_s == RunLimits().cpu_s  # the rest: the contract's defaults


async def test_output_past_one_reply_is_refused_before_running(runner_url: str, nc: NATS) -> None:
    """100 cases asking 64 KiB of output could print 13 MB: refused up front, naming the most
    output_bytes 100 cases may ask, instead of coming back cut."""
    req = py_request("print(1)\n", *(RunCase(name=f"c{i}") for i in range(MAX_CASES)))
    req = req.model_copy(update={"limits": RunLimits(wall_s=5, output_bytes=64 * 1024)})
    with pytest.raises(ContractError) as err:
        await request(nc, subjects.RUNNER_RUN, req, RunReply, timeout=60)
    assert err.value.code is ErrorCode.limit_exceeded
    assert "MAX_OUTPUT_TOTAL_BYTES" in err.value.message
    assert f"at most {max_output_bytes(MAX_CASES)} for 100 cases" in err.value.message
