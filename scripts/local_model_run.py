"""A manual run of the gateway on a real self-hosted model (issue 31; never a CI step).

Starts a nats-server (the test kit's), the llm-gateway in this process with
LLM_DATA_RESIDENCY=local and every purpose on `openai-compat/<model>`, points it at an
OpenAI-compatible server already running at `--base-url` (llama.cpp's server, vLLM, Ollama,
LocalAI), then asks it over NATS: one structured call (a forced function call, validated as
every call is), one free-text call, and a purpose left on Anthropic (refused, nothing sent).
Prints each reply, its tokens and the wall time, and /readyz's residency. docs/llm-gateway.md
"A manual run with a real small local model" says how to start a server and what was seen.

    uv run --no-sync python scripts/local_model_run.py --base-url http://127.0.0.1:8290/v1 \\
        --model gemma3-270m [--structured tools|json_schema|json_object]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    Purpose,
)
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.main import create_app
from quiz_servicekit.natsio import NotAnswered, request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.serving import serve_app

CHOICES = {
    "type": "object",
    "properties": {
        "choices": {"type": "array", "minItems": 2, "maxItems": 4, "items": {"type": "string"}}
    },
    "required": ["choices"],
}


async def ask(nc: Any, subject: str, body: Any, reply: type[Any]) -> Any:
    """The request, asked again while the gateway has not subscribed yet."""
    for _ in range(50):
        try:
            return await request(nc, subject, body, reply, timeout=120)
        except NotAnswered as e:
            if e.delivered:
                raise
            await asyncio.sleep(0.1)
    return await request(nc, subject, body, reply, timeout=120)


async def call(nc: Any, label: str, req: CompleteRequest) -> None:
    began = time.perf_counter()
    try:
        reply = await ask(nc, subjects.LLM_COMPLETE, req, CompleteReply)
    except ContractError as e:
        print(f"{label}: {e.code.value}: {e.message}")
        return
    took = time.perf_counter() - began
    print(
        f"{label}: {took:.2f} s, attempts={reply.attempts}, stop={reply.stop_reason}, "
        f"tokens in/out={reply.usage.input_tokens}/{reply.usage.output_tokens}, "
        f"cost={reply.usage.cost_usd} USD, model={reply.model}"
    )
    print("  output:", json.dumps(reply.output, ensure_ascii=False)[:400])


async def main(base_url: str, model: str, structured: str) -> None:
    local = f"openai-compat/{model}"
    with tempfile.TemporaryDirectory(prefix="local-model-run-") as tmp:
        work = Path(tmp)
        nats = NatsServer(work / "nats", locked=False).start()
        try:
            keys = SigningKeys.load_or_create(work / "jwt")
            settings = Settings(
                nats_url=nats.url,
                database_url=f"sqlite:///{work / 'gateway.db'}",
                jwks_file=str(keys.jwks_path),
                settle_journal_dir=str(work / "journal"),
                openai_compat_base_url=base_url,
                openai_compat_structured=structured,  # type: ignore[arg-type]
                purpose_models={p.value: local for p in Purpose if p is not Purpose.review},
                llm_model_prices={local: [0, 0]},
                data_residency="local",
                daily_cap_usd=Decimal("1"),
                provider_timeout_s=120,
                default_deadline_s=120,
            )
            async with serve_app(create_app(settings), settings) as url:
                nc = await nats_connect(nats.url)
                try:
                    await call(
                        nc,
                        "structured (generate)",
                        CompleteRequest.model_validate(
                            {
                                "purpose": "generate",
                                "user": "teacher-1",
                                "system": "You write quiz answer choices.",
                                "messages": [
                                    {
                                        "role": "user",
                                        "content": "Question: What is 2 + 2? Propose 3 choices.",
                                    }
                                ],
                                "output_schema": {"name": "choices", "json_schema": CHOICES},
                                "max_output_tokens": 200,
                            }
                        ),
                    )
                    await call(
                        nc,
                        "structured, cut (max_output_tokens=4)",
                        CompleteRequest.model_validate(
                            {
                                "purpose": "generate",
                                "user": "teacher-1",
                                "messages": [{"role": "user", "content": "Choices for 2 + 2?"}],
                                "output_schema": {"name": "choices", "json_schema": CHOICES},
                                "max_output_tokens": 4,
                            }
                        ),
                    )
                    await call(
                        nc,
                        "free text (assistant)",
                        CompleteRequest.model_validate(
                            {
                                "purpose": "assistant",
                                "user": "teacher-1",
                                "messages": [
                                    {"role": "user", "content": "Say hello to a class in French."}
                                ],
                                "max_output_tokens": 60,
                            }
                        ),
                    )
                    await call(
                        nc,
                        "review (left on Anthropic)",
                        CompleteRequest.model_validate(
                            {
                                "purpose": "review",
                                "user": "teacher-1",
                                "messages": [{"role": "user", "content": "Review."}],
                                "max_output_tokens": 60,
                            }
                        ),
                    )
                    available = await ask(
                        nc, subjects.LLM_AVAILABILITY, AvailabilityRequest(), AvailabilityReply
                    )
                    print(
                        "availability providers:",
                        {p.value: n for p, n in available.providers.items()},
                    )
                    async with httpx.AsyncClient() as http:
                        details = (await http.get(f"{url}/readyz")).json()["details"]
                    print("readyz residency:", details["residency"])
                    print("readyz openai_compat:", details["openai_compat"])
                finally:
                    await nc.close()
        finally:
            nats.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8290/v1")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument(
        "--structured", default="tools", choices=["tools", "json_schema", "json_object"]
    )
    args = parser.parse_args()
    asyncio.run(main(args.base_url, args.model, args.structured))
