"""The reply budget: refused up front when it cannot fit, otherwise cut to fit, never over."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.runner import CaseResult, CompileResult, PictureSpec, RunReply, text_and_b64
from quiz_runner.replies import ReplyBudget, cut_outputs, empty_case_size, wire_size


def case(name: str, stdout: bytes, stderr: bytes = b"", **status: object) -> CaseResult:
    out, out_b64 = text_and_b64(stdout)
    err, err_b64 = text_and_b64(stderr)
    return CaseResult(
        name=name, stdout=out, stdout_b64=out_b64, stderr=err, stderr_b64=err_b64, **status
    )


def budget(limit: int, names: list[str], picture: PictureSpec | None = None) -> ReplyBudget:
    return ReplyBudget(
        limit,
        language="python",
        backend="bwrap",
        case_names=names,
        compile_output_bytes=1024,
        picture=picture,
    )


def test_a_reply_that_cannot_fit_even_empty_is_refused_up_front() -> None:
    names = [f"c{i}" for i in range(100)]
    least = sum(empty_case_size(n) + 1 for n in names)
    with pytest.raises(ContractError) as err:
        budget(least, names)
    assert err.value.code is ErrorCode.limit_exceeded
    assert "100 cases" in err.value.message and "MAX_REPLY_BYTES" in err.value.message
    with pytest.raises(ContractError) as err:
        budget(20_000, ["a"], PictureSpec(width=128, height=128, palette="gray256"))
    assert "128x128 picture" in err.value.message


def test_outputs_that_fit_come_back_whole() -> None:
    b = budget(100_000, ["a", "b"])
    b.compiled(CompileResult(ok=True))
    first = case("a", b"x" * 1000, exit_code=0)
    assert b.fit(first) == first


def test_outputs_past_the_room_are_cut_and_the_rest_still_fits() -> None:
    names = ["a", "b", "c"]
    b = budget(30_000, names)
    b.compiled(CompileResult(ok=True, output="warning"))
    reply = RunReply(language="python", compile=CompileResult(ok=True, output="warning"))
    reply.backend = "bwrap"
    for name in names:
        reply.cases.append(b.fit(case(name, b"o" * 20_000, b"e" * 5_000, exit_code=7)))
    a, bb, c = reply.cases
    assert not a.reply_cut and a.stdout == "o" * 20_000
    assert bb.reply_cut and bb.exit_code == 7 and set(bb.stdout) <= {"o"}
    # Its status was reserved; only the slack of the widest-status reservations is left.
    assert c.reply_cut and len(c.stdout) < 200 and c.exit_code == 7
    assert wire_size(reply) <= 30_000


def test_a_cut_keeps_text_text() -> None:
    """A cut inside a character would turn valid UTF-8 into bytes: it backs off instead."""
    result = case("a", "é".encode() * 1000)
    cut = cut_outputs(result, wire_size(case("a", b"")) + 101)
    assert cut.reply_cut and cut.stdout_b64 is None and set(cut.stdout) <= {"é"}


@settings(max_examples=60, deadline=None)
@given(
    outputs=st.lists(st.tuples(st.binary(max_size=3000), st.binary(max_size=3000)), max_size=8),
    limit=st.integers(min_value=3_000, max_value=20_000),
)
def test_the_reply_never_exceeds_its_limit(outputs: list[tuple[bytes, bytes]], limit: int) -> None:
    names = [f"case-{i}" for i in range(len(outputs))]
    try:
        b = budget(limit, names)
    except ContractError:
        return  # refused before anything ran
    compile_result = CompileResult(ok=True)
    b.compiled(compile_result)
    reply = RunReply(language="python", compile=compile_result, backend="bwrap")
    for name, (out, err) in zip(names, outputs, strict=True):
        fitted = b.fit(case(name, out, err, exit_code=0))
        assert fitted.stdout_bytes() == out[: len(fitted.stdout_bytes())]
        assert fitted.stderr_bytes() == err[: len(fitted.stderr_bytes())]
        assert fitted.reply_cut == (fitted.stdout_bytes() != out or fitted.stderr_bytes() != err)
        reply.cases.append(fitted)
    assert wire_size(reply) <= limit
