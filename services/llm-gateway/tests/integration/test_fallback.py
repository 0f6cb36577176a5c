"""Issue 31: fallback to the next model, the platform's share rules at admission, and the quota
on the reply — the real SDK against the stub, a real database."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteRequest
from quiz_llm_gateway.domain.circuit import CircuitState
from quiz_testkit.anthropic_stub import StubReply

from .conftest import leased

# The platform's default model (issue 31), which the rig otherwise pins to sonnet-4-6.
DEFAULTS = {"purpose_models": {}}

PRIMARY = "claude-sonnet-5-5"
FALLBACK = "claude-haiku-4-5"
FALLBACKS = {PRIMARY: [FALLBACK]}


def request(**overrides: Any) -> CompleteRequest:
    body: dict[str, Any] = {
        "purpose": "generate",
        "user": "teacher-1",
        "messages": [{"role": "user", "content": "Complete this question."}],
        "output_schema": {
            "name": "answer",
            "json_schema": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        },
        "max_output_tokens": 500,
    }
    body.update(overrides)
    return CompleteRequest.model_validate(body)


def overloaded_primary(body: dict[str, Any]) -> StubReply:
    """The primary model is overloaded (529); any other answers."""
    if body["model"] == PRIMARY:
        return StubReply.error(529, message="Overloaded")
    return StubReply.tool({"answer": "42"}, usage={"input_tokens": 1000, "output_tokens": 100})


def models_sent(rig: Any) -> list[str]:
    return [r.body["model"] for r in rig.stub.requests]


async def test_after_the_retries_on_529_the_fallback_answers_under_the_same_call(
    make_rig: Any,
) -> None:
    rig = make_rig(
        **DEFAULTS, fallback_models=FALLBACKS, provider_max_retries=2, circuit_failures=10
    )
    rig.stub.script(*[StubReply.callable(overloaded_primary) for _ in range(4)])
    reply = await rig.gateway.complete(request(request_id="generate:mcq:k1"))
    assert reply.output == {"answer": "42"}
    # Three requests to the primary (one and two retries), then the fallback, once.
    assert models_sent(rig) == [PRIMARY, PRIMARY, PRIMARY, FALLBACK]
    assert reply.model == FALLBACK and reply.attempts == 2
    # Haiku: 1000 × $1/MTok + 100 × $5/MTok = $0.0015, the only cost.
    assert reply.usage.cost_usd == Decimal("0.0015")
    rows = sorted(await rig.repo.ledger_rows(call_id=reply.call_id), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["model"], r["outcome"]) for r in rows] == [
        (1, PRIMARY, "provider_error"),
        (2, FALLBACK, "ok"),
    ]
    assert [r["cost_micros"] for r in rows] == [0, 1500]
    assert {r["request_id"] for r in rows} == {"generate:mcq:k1"}
    # The fallback's hold was its own, at its price (haiku's worst case < sonnet's).
    assert 0 < rows[1]["reserved_micros"] < rows[0]["reserved_micros"]
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.spent_micros == 1500
    assert totals.reserved_micros == await leased(rig.repo)
    # Each model has its own circuit: the primary's failures never touch the fallback's.
    assert rig.gateway.circuit(FALLBACK).current(rig.clock.monotonic()) is CircuitState.closed
    assert rig.gateway.circuit(PRIMARY).failures == 3
    # The same request id again is the stored reply: no provider request, same model.
    again = await rig.gateway.complete(request(request_id="generate:mcq:k1"))
    assert again.model == FALLBACK and again.call_id == reply.call_id
    assert len(rig.stub.requests) == 4


async def test_with_the_primarys_circuit_open_the_fallback_answers_first(make_rig: Any) -> None:
    rig = make_rig(
        **DEFAULTS, fallback_models=FALLBACKS, provider_max_retries=0, circuit_failures=2
    )
    rig.stub.script(*[StubReply.callable(overloaded_primary) for _ in range(5)])
    first = await rig.gateway.complete(request())
    second = await rig.gateway.complete(request())
    assert models_sent(rig) == [PRIMARY, FALLBACK, PRIMARY, FALLBACK]
    assert rig.gateway.circuit(PRIMARY).current(rig.clock.monotonic()) is CircuitState.open
    # Open: no request to the primary at all, the fallback answers, availability says closed
    # (the purpose can be served).
    third = await rig.gateway.complete(request())
    assert models_sent(rig)[4:] == [FALLBACK]
    assert {first.model, second.model, third.model} == {FALLBACK}
    assert third.attempts == 1
    [row] = await rig.repo.ledger_rows(call_id=third.call_id)
    assert row["model"] == FALLBACK and row["attempt"] == 1
    assert (await rig.gateway.availability()).circuit == "closed"


async def test_without_a_fallback_the_call_fails_as_before(make_rig: Any) -> None:
    rig = make_rig(**DEFAULTS, provider_max_retries=1)
    rig.stub.script(*[StubReply.callable(overloaded_primary) for _ in range(2)])
    with pytest.raises(ContractError) as e:
        await rig.gateway.complete(request())
    assert e.value.code is ErrorCode.llm_failed
    assert models_sent(rig) == [PRIMARY, PRIMARY]


async def test_a_final_4xx_does_not_fall_back(make_rig: Any) -> None:
    rig = make_rig(**DEFAULTS, fallback_models=FALLBACKS)
    rig.stub.script(StubReply.error(400, message="bad request"))
    with pytest.raises(ContractError) as e:
        await rig.gateway.complete(request())
    assert e.value.code is ErrorCode.llm_failed
    assert models_sent(rig) == [PRIMARY]


async def test_the_fallbacks_hold_is_checked_at_its_price(make_rig: Any) -> None:
    """A dearer fallback whose worst case does not fit what is left: budget_exhausted, and
    nothing charged beyond what was spent (the primary's failed attempt cost 0)."""
    dear = "claude-opus-5-5"
    # 500 output tokens: sonnet-5-5 holds ~$0.0064, opus-5-5 ~$0.0128.
    rig = make_rig(
        **DEFAULTS,
        fallback_models={PRIMARY: [dear]},
        provider_max_retries=0,
        daily_cap_usd=Decimal("0.01"),
        cap_slice_calls=0,
    )
    rig.stub.script(StubReply.error(529, message="Overloaded"))
    with pytest.raises(ContractError) as e:
        await rig.gateway.complete(request())
    assert e.value.code is ErrorCode.llm_budget_exhausted
    assert models_sent(rig) == [PRIMARY]
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.spent_micros == 0 and totals.reserved_micros == 0


async def test_the_reply_tells_the_quota_left(make_rig: Any) -> None:
    rig = make_rig(**DEFAULTS, rate_limits={"generate": 3}, cap_slice_calls=0)
    usage = {"input_tokens": 1000, "output_tokens": 100}
    rig.stub.script(*[StubReply.tool({"answer": "42"}, usage=usage) for _ in range(3)])
    replies = [await rig.gateway.complete(request()) for _ in range(3)]
    # sonnet-5-5: 1000 × $2/MTok + 100 × $10/MTok = $0.003 a call, on a $5 cap.
    assert [r.remaining_usd for r in replies] == [
        Decimal("4.997"),
        Decimal("4.994"),
        Decimal("4.991"),
    ]
    assert [r.remaining_calls for r in replies] == [2, 1, 0]
    # Scheduled work has no per-person limit: no count to tell.
    rig.stub.script(StubReply.tool({"answer": "42"}, usage=usage))
    night = await rig.gateway.complete(request(purpose="review", user=None))
    assert night.remaining_calls is None and night.remaining_usd == Decimal("4.988")


async def test_the_quota_comes_from_the_rate_check_and_the_settle_with_slices(
    make_rig: Any,
) -> None:
    """Issue 31 item 6 without a read of its own: held in this replica's slice (the rate-only
    check), the calls left are the check's count; remaining_usd is cap − spent − reserved as
    the settle left the day row (the slice leased whole counts as held); a fallback after a
    failed first attempt keeps the first admission's count (the same call, counted once)."""
    rig = make_rig(
        **DEFAULTS, rate_limits={"generate": 3}, fallback_models=FALLBACKS, provider_max_retries=0
    )
    usage = {"input_tokens": 1000, "output_tokens": 100}
    rig.stub.script(*[StubReply.tool({"answer": "42"}, usage=usage) for _ in range(2)])
    replies = [await rig.gateway.complete(request()) for _ in range(2)]
    rig.stub.script(
        StubReply.error(529, message="Overloaded"), StubReply.tool({"answer": "42"}, usage=usage)
    )
    replies.append(await rig.gateway.complete(request()))
    assert [r.model for r in replies] == [PRIMARY, PRIMARY, FALLBACK]
    assert [r.remaining_calls for r in replies] == [2, 1, 0]
    totals = await rig.repo.day_totals(rig.gateway.today())
    assert totals is not None and totals.reserved_micros > 0  # a slice is leased
    left = Decimal(5) - (Decimal(totals.spent_micros + totals.reserved_micros) / 10**6)
    assert replies[-1].remaining_usd == left
    with pytest.raises(ContractError) as e:
        await rig.gateway.complete(request())
    assert e.value.code is ErrorCode.rate_limited


async def test_the_assistants_share_refuses_first_and_writes_nothing(make_rig: Any) -> None:
    """LLM_ASSISTANT_SHARE (FACTS E2 shareAllows): the assistant's own spend + the worst case
    within share × cap. Its refusal is budget_exhausted with no ledger row; the others go on."""
    rig = make_rig(**DEFAULTS, assistant_share=Decimal("0.25"), daily_cap_usd=Decimal("0.04"))
    # A text call of 500 output tokens holds about $0.0064 at sonnet-5-5: share = $0.01.
    usage = {"input_tokens": 1000, "output_tokens": 100}
    rig.stub.script(*[StubReply.text("ok", usage=usage) for _ in range(3)])
    ask = request(purpose="assist", output_schema=None)
    first = await rig.gateway.complete(ask)
    assert first.usage.cost_usd == Decimal("0.003")
    # $0.003 spent + ~$0.0064 ≤ $0.01: a second passes; then $0.006 + ~$0.0064 > $0.01.
    await rig.gateway.complete(request(purpose="assistant", output_schema=None))
    with pytest.raises(ContractError) as e:
        await rig.gateway.complete(ask)
    assert e.value.code is ErrorCode.llm_budget_exhausted
    assert "share" in e.value.message
    rows = await rig.repo.ledger_rows(purpose="assist")
    assert len(rows) == 1  # the refusal wrote nothing
    # Another purpose still has the rest of the cap.
    other = await rig.gateway.complete(request(output_schema=None))
    assert other.model == PRIMARY
