"""Every NATS we ship takes the messages the contracts' maxima are derived from, and every
maximum, reached all at once, travels in one message each way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from quiz_contracts.bus import nats_accounts_config
from quiz_contracts.runner import (
    MAX_ARGS,
    MAX_CASES,
    MAX_CASES_WIRE_BYTES,
    MAX_FILES,
    MAX_FILES_WIRE_BYTES,
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    MESSAGE_HEADROOM,
    CaseResult,
    CompileResult,
    Picture,
    PictureSpec,
    RunCase,
    RunFile,
    RunLimits,
    RunReply,
    RunRequest,
    max_output_bytes,
    text_and_b64,
)
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_runner.pictures import picture_output_floor
from quiz_runner.replies import ReplyBudget
from quiz_runner.service import CompileLimits, validate_request
from quiz_testkit.nats_server import nats_config

ROOT = Path(__file__).resolve().parents[4]


def max_payload_of(conf: str) -> int:
    found = re.search(r"^max_payload:\s*(\d+)\s*$", conf, re.MULTILINE)
    assert found, conf
    return int(found.group(1))


def test_maxima_derive_from_max_payload() -> None:
    assert MAX_REQUEST_BYTES == MAX_REPLY_BYTES == NATS_MAX_PAYLOAD - MESSAGE_HEADROOM
    # nats-server accepts up to 64 MB and advises 8 MB at most.
    assert NATS_MAX_PAYLOAD <= 8 * 1024 * 1024


def test_the_testkit_and_make_run_configure_it() -> None:
    # The open bus (a test asking for one) and the locked bus (the default, and make run's).
    assert max_payload_of(nats_config()) == NATS_MAX_PAYLOAD
    assert max_payload_of(nats_accounts_config()) == NATS_MAX_PAYLOAD
    devrun = (ROOT / "scripts" / "devrun.py").read_text()
    assert "nats_accounts_config(" in devrun and '"-c"' in devrun


def test_compose_configures_it() -> None:
    conf = (ROOT / "deploy" / "nats" / "accounts.conf").read_text()
    assert max_payload_of(conf) == NATS_MAX_PAYLOAD
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    nats = compose["services"]["nats"]
    config_at = nats["command"][nats["command"].index("-c") + 1]
    assert f"./deploy/nats/accounts.conf:{config_at}:ro" in nats["volumes"]


def test_the_helm_values_configure_it() -> None:
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "nats-values.yaml").read_text())
    assert values["config"]["merge"]["max_payload"] == NATS_MAX_PAYLOAD
    assert values["config"]["jetstream"]["enabled"] is True


# ---- Every documented maximum, reached all at once, travels in one message each way ----

WORST_NAME = "\x01" * 200  # a control character takes 6 bytes of JSON: the widest case name


def long_path(i: int) -> str:
    return f"{i:02d}" + "a" * 198  # check_file_path allows 200 characters


def worst_request(cases: int = MAX_CASES) -> RunRequest:
    """Files and cases at their wire maxima, and every other field at its widest."""
    per_file = MAX_FILES_WIRE_BYTES // MAX_FILES
    files = []
    for i in range(MAX_FILES):
        f = RunFile(path=long_path(i), content="")
        files.append(
            f.model_copy(update={"content": "\x01" * ((per_file - len(f.model_dump_json())) // 6)})
        )
    per_case = MAX_CASES_WIRE_BYTES // cases
    built = []
    for _ in range(cases):
        c = RunCase(name=WORST_NAME, args=["\x01" * 16] * MAX_ARGS)
        built.append(
            c.model_copy(update={"stdin": "\x01" * ((per_case - len(c.model_dump_json())) // 6)})
        )
    return RunRequest(
        language="javascript",
        files=files,
        entry=long_path(MAX_FILES - 1),
        cases=built,
        limits=RunLimits(output_bytes=max_output_bytes(cases), cpu_s=9.999, wall_s=19.999),
        picture=PictureSpec(
            width=128, height=128, palette="gray256", source="file", path=long_path(0)
        ),
    )


def test_a_request_at_every_maximum_fits_in_one_message() -> None:
    """Within MAX_FILES_WIRE_BYTES and MAX_CASES_WIRE_BYTES, the rest cannot push a request past
    MAX_REQUEST_BYTES: the runner accepts it and it travels."""
    req = worst_request()
    assert sum(len(f.model_dump_json()) for f in req.files) > MAX_FILES_WIRE_BYTES - 4096
    assert sum(len(c.model_dump_json()) for c in req.cases) > MAX_CASES_WIRE_BYTES - 4096
    validate_request(req)
    assert len(req.model_dump_json()) <= MAX_REQUEST_BYTES


def worst_output(n: int) -> CaseResult:
    """n bytes of 0xff on both streams: escaped text and base64, the widest output per byte."""
    text, b64 = text_and_b64(b"\xff" * n)
    return CaseResult(
        name=WORST_NAME,
        stdout=text,
        stdout_b64=b64,
        stderr=text,
        stderr_b64=b64,
        exit_code=-(2**31),
        signal="SIGXCPU",
        cpu_ms=10**12,
        wall_ms=10**12,
        timed_out="wall",
        output_truncated=True,
        memory_exceeded=True,
    )


@pytest.mark.parametrize("cases", [1, 30, MAX_CASES])
def test_a_reply_at_every_maximum_comes_back_whole(cases: int) -> None:
    """Every case printing max_output_bytes of the widest bytes on both streams (the picture's
    case its raised limit on stderr), the widest compile output and a 128 x 128 gray256 picture
    with its error: nothing is cut, and the reply is within MAX_REPLY_BYTES."""
    spec = PictureSpec(width=128, height=128, palette="gray256")
    compile_bytes = CompileLimits().output_bytes
    budget = ReplyBudget(
        MAX_REPLY_BYTES,
        language="javascript",
        backend="docker",
        case_names=[WORST_NAME] * cases,
        compile_output_bytes=compile_bytes,
        picture=spec,
    )
    out, out_b64 = text_and_b64(b"\xff" * compile_bytes)
    compiled = CompileResult(
        ok=True,
        output=out,
        output_b64=out_b64,
        output_truncated=True,
        timed_out=True,
        wall_ms=10**12,
    )
    budget.compiled(compiled)
    reply = RunReply(language="javascript", compile=compiled, backend="docker")
    picture = Picture(
        width=128,
        height=128,
        palette="gray256",
        pixels="x" * 2 * 128 * 128,
        missing_pixels=128 * 128,
        invalid_pixels=128 * 128,
        extra_tokens=10**12,
        error="e" * 1000,
    )
    budget.drawn(picture)
    reply.picture = picture
    each = max_output_bytes(cases)
    for i in range(cases):
        result = worst_output(each)
        if i == 0:  # the picture's case: stdout is the picture, stderr at its raised limit
            text, b64 = text_and_b64(b"\xff" * max(each, picture_output_floor(spec)))
            result = result.model_copy(
                update={"stdout": "", "stdout_b64": None, "stderr": text, "stderr_b64": b64}
            )
        fitted = budget.fit(result)
        assert not fitted.reply_cut, i
        reply.cases.append(fitted)
    assert len(reply.model_dump_json()) <= MAX_REPLY_BYTES
