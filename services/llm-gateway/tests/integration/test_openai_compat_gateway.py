"""The gateway over NATS with a self-hosted OpenAI-compatible model (issue 31, points 3 and 4).

A real nats-server (testkit), the gateway app in process, the real `openai` SDK against the
test kit's OpenAI stub, and the Anthropic stub beside it to prove what is never called.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    Purpose,
)
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.pricing import PricingError
from quiz_llm_gateway.main import create_app
from quiz_servicekit.natsio import NotAnswered, request
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.openai_stub import ChatReply, OpenAIStub
from quiz_testkit.serving import serve_app

from .test_nats import complete_request

pytestmark = pytest.mark.integration

LOCAL = "openai-compat/gemma3-270m"


async def ask(nc: NATS, subject: str, body: Any, reply: type[Any]) -> Any:
    """`request`, asked again while nobody answers yet: a gateway started inside the test
    subscribes on its own connection, which the server may not have seen when it is asked."""
    for _ in range(50):
        try:
            return await request(nc, subject, body, reply, timeout=10)
        except NotAnswered as e:
            if e.delivered:
                raise
            await asyncio.sleep(0.1)
    return await request(nc, subject, body, reply, timeout=10)


# Every purpose local but review, which stays on Anthropic (refused under residency local).
# Review stays on an Anthropic model (pinned, as the other integration rigs pin theirs).
REMOTE = "claude-sonnet-4-6"
MODELS = {**{p.value: LOCAL for p in Purpose if p is not Purpose.review}, "review": REMOTE}


@pytest.fixture(scope="module")
def local_server() -> Iterator[OpenAIStub]:
    with OpenAIStub(api_key="sk-school") as stub:
        yield stub


@pytest.fixture
def local(local_server: OpenAIStub) -> Iterator[OpenAIStub]:
    local_server.reset()
    yield local_server
    local_server.reset()


@pytest.fixture
def make_settings(
    nats_url: str,
    database_url: str,
    anthropic_stub: AnthropicStub,
    local: OpenAIStub,
    signing_keys: SigningKeys,
    tmp_path: Path,
) -> Any:
    def build(**overrides: Any) -> Settings:
        base: dict[str, Any] = {
            "settle_journal_dir": str(tmp_path / "journal"),
            "nats_url": nats_url,
            "jwks_file": str(signing_keys.jwks_path),
            "database_url": database_url,
            "anthropic_api_key": "test-key",
            "anthropic_base_url": anthropic_stub.base_url,
            "openai_compat_base_url": local.base_url,
            "openai_compat_api_key": "sk-school",
            "purpose_models": MODELS,
            "llm_model_prices": {LOCAL: [0.5, 2]},
            "daily_cap_usd": Decimal("3"),
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
        }
        base.update(overrides)
        return Settings(**base)

    return build


@pytest.fixture
async def gateway(make_settings: Any) -> AsyncIterator[str]:
    settings = make_settings(data_residency="local")
    async with serve_app(create_app(settings), settings) as url:
        yield url


async def test_a_structured_call_is_answered_by_the_local_model_and_billed_at_its_price(
    gateway: str, nc: NATS, local: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    local.script(
        ChatReply.call({"choices": ["4"]}, {"prompt_tokens": 1000, "completion_tokens": 100})
    )
    reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert reply.output == {"choices": ["4"]} and reply.model == LOCAL
    # 1000 × $0.5 + 100 × $2 per million tokens.
    assert reply.usage.cost_usd == Decimal("0.0007")
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1000, 100)
    [sent] = local.requests
    assert sent.body["model"] == "gemma3-270m"
    assert sent.body["tool_choice"] == {"type": "function", "function": {"name": "proposal"}}
    assert anthropic_stub.requests == []


async def test_an_invalid_reply_is_asked_again_with_what_was_wrong(
    gateway: str, nc: NATS, local: OpenAIStub
) -> None:
    local.script(ChatReply.call({"choices": "four"}), ChatReply.call({"choices": ["4"]}))
    reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert reply.output == {"choices": ["4"]} and reply.attempts == 2
    second = local.requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and "did not match the schema" in second[-1]["content"]


async def test_finish_reason_length_is_a_cut_reply_never_retried_with_the_same_budget(
    gateway: str, nc: NATS, local: OpenAIStub
) -> None:
    local.script(ChatReply.call('{"choices": ["4"', finish_reason="length"))
    with pytest.raises(ContractError) as caught:
        await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert caught.value.code == ErrorCode.llm_failed
    assert "max_output_tokens=300" in caught.value.message
    assert len(local.requests) == 1


async def test_a_429_is_retried_after_its_retry_after_and_a_5xx_too(
    gateway: str, nc: NATS, local: OpenAIStub
) -> None:
    local.script(
        ChatReply.error(429, retry_after=0.05),
        ChatReply.error(503),
        ChatReply.call({"choices": ["4"]}),
    )
    reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert reply.output == {"choices": ["4"]} and reply.attempts == 1
    assert len(local.requests) == 3


async def test_a_purpose_on_anthropic_is_refused_under_local_residency_and_never_sent(
    gateway: str, nc: NATS, anthropic_stub: AnthropicStub, local: OpenAIStub
) -> None:
    with pytest.raises(ContractError) as caught:
        await ask(
            nc,
            subjects.LLM_COMPLETE,
            complete_request(purpose="review"),
            CompleteReply,
        )
    assert caught.value.code == ErrorCode.llm_not_configured
    assert "LLM_DATA_RESIDENCY=local" in caught.value.message
    assert "claude-sonnet-4-6" in caught.value.message
    assert anthropic_stub.requests == [] and local.requests == []


async def test_availability_names_each_purposes_provider_and_the_residency(
    gateway: str, nc: NATS, local: OpenAIStub
) -> None:
    every = await ask(nc, subjects.LLM_AVAILABILITY, AvailabilityRequest(), AvailabilityReply)
    assert every.residency == "local"
    assert every.providers[Purpose.poll] == "127.0.0.1"  # the base URL's host: no name set
    assert every.providers[Purpose.review] == "Anthropic"
    assert every.available  # the local purposes can be called
    review = await ask(
        nc,
        subjects.LLM_AVAILABILITY,
        AvailabilityRequest(purpose=Purpose.review),
        AvailabilityReply,
    )
    assert not review.available and review.reason == ErrorCode.llm_not_configured
    poll = await ask(
        nc,
        subjects.LLM_AVAILABILITY,
        AvailabilityRequest(purpose=Purpose.poll),
        AvailabilityReply,
    )
    assert poll.available and poll.models == {Purpose.poll: LOCAL}


async def test_readyz_reports_the_residency_and_the_local_server(gateway: str) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{gateway}/readyz")
    assert r.status_code == 200, r.text
    details = r.json()["details"]
    assert details["residency"] == {
        "setting": "local",
        "refused_purposes": {"review": "claude-sonnet-4-6"},
    }
    assert details["openai_compat"]["configured"] is True
    assert details["openai_compat"]["base_url"] == gateway_base(details)
    assert details["provider"]["configured"] is False
    assert "LLM_DATA_RESIDENCY=local" in details["provider"]["why"]
    assert "sk-school" not in json.dumps(details)


def gateway_base(details: dict[str, Any]) -> str:
    url = details["openai_compat"]["base_url"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    return str(url)


async def test_without_residency_both_providers_answer_their_own_purposes(
    make_settings: Any, nc: NATS, anthropic_stub: AnthropicStub, local: OpenAIStub
) -> None:
    settings = make_settings(openai_compat_provider_name="Ollama")
    async with serve_app(create_app(settings), settings):
        local_reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
        remote = await ask(
            nc,
            subjects.LLM_COMPLETE,
            complete_request(purpose="review"),
            CompleteReply,
        )
        every = await ask(nc, subjects.LLM_AVAILABILITY, AvailabilityRequest(), AvailabilityReply)
    assert local_reply.model == LOCAL and remote.model == "claude-sonnet-4-6"
    assert len(local.requests) == 1 and len(anthropic_stub.requests) == 1
    assert every.residency == "any" and every.providers[Purpose.poll] == "Ollama"


@pytest.mark.parametrize(
    ("prices", "said"),
    [
        ({}, "set LLM_MODEL_PRICES"),
        ({LOCAL: [1]}, "LLM_MODEL_PRICES['openai-compat/gemma3-270m'] must be [input, output]"),
    ],
)
def test_a_self_hosted_model_without_a_price_refuses_to_start(
    make_settings: Any, prices: dict[str, Any], said: str
) -> None:
    with pytest.raises(PricingError, match=said.replace("[", r"\[").replace("]", r"\]")):
        create_app(make_settings(llm_model_prices=prices))


def test_the_gateway_process_refuses_an_unpriced_model_in_one_line() -> None:
    """Run as operations run it: status 2 and the setting to set, no traceback."""
    env = {**os.environ, "PURPOSE_MODELS": json.dumps({"review": LOCAL}), "LOG_LEVEL": "INFO"}
    env.pop("LLM_MODEL_PRICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "quiz_llm_gateway.main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("quiz-llm-gateway: refused to start: no price for")
    assert "set LLM_MODEL_PRICES" in done.stderr and "Traceback" not in done.stderr


async def test_an_explicit_zero_price_is_free_and_still_counted(
    make_settings: Any, nc: NATS, local: OpenAIStub
) -> None:
    settings = make_settings(llm_model_prices={LOCAL: [0, 0]}, data_residency="local")
    async with serve_app(create_app(settings), settings):
        reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert reply.usage.cost_usd == 0 and reply.usage.input_tokens > 0


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
async def test_the_response_format_modes_read_the_reply_text(
    make_settings: Any, nc: NATS, local: OpenAIStub, mode: str
) -> None:
    settings = make_settings(openai_compat_structured=mode, data_residency="local")
    async with serve_app(create_app(settings), settings):
        local.script(ChatReply.call({"choices": ["4", "5"]}))
        reply = await ask(nc, subjects.LLM_COMPLETE, complete_request(), CompleteReply)
    assert reply.output == {"choices": ["4", "5"]}
    assert local.requests[0].body["response_format"]["type"] == mode
