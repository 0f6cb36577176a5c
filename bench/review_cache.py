"""Prompt caching on a review night (issue 31 point 2): input cost per question, with ÷ without.

Run: `uv run python bench/review_cache.py [--questions 20] [--model claude-sonnet-4-6]` (the
model defaults to the gateway's, claude-sonnet-5-5: structured output as `output_config.format`,
so the marked prefix is the system prompt alone).

A nats-server of its own, the testkit's Anthropic stub in this process (it reports caching as
Anthropic does: a prefix marked cacheable, at least the model's minimum, is written the first
time and read within 5 minutes of its last use; `input_tokens` the rest), and the real
llm-gateway as its own process, twice in the same run on fresh databases: with prompt caching
(the default) and with `LLM_GATEWAY_PROMPT_CACHE=false` (no `cache_control` sent, every input
token at the full price, as before issue 31). Each run sends the night's `--questions` calls one
at a time, as the night builds them (`review_request(type, config, explanation, user=None)`:
the same system prompt and reply schema, the question in the user message), over NATS with
`LlmClient`. The questions differ in type and length (mcq, short, a rich one with a long
explanation).

Printed per question: the input tokens the gateway settled (plain / read from the cache /
written to it) and the input cost (USD, the gateway's prices: cost_usd minus the output tokens
at the output price), with and without caching, and their ratio; then the night's totals, and
the ratio of the input cost per question with ÷ without caching (target ≤ 0.5).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from quiz_contracts.llm import CompleteReply
from quiz_llm_gateway.domain.pricing import DEFAULT_PRICES, PLATFORM_DEFAULT_MODEL
from quiz_review.domain.prompt import review_request
from quiz_servicekit.llm import LlmClient
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import ServiceProcess

LONG_EXPLANATION = (
    "La dérivée d'un produit se calcule par la règle de Leibniz : (uv)' = u'v + uv'. "
    "Ici u = x² et v = sin x, donc u' = 2x et v' = cos x. "
) * 12


def question(i: int) -> tuple[str, dict[str, Any], str]:
    """The i-th question of the night: mostly small mcqs, some short answers, one long rich."""
    if i % 7 == 3:
        return (
            "rich",
            {"prompt": f"Expliquez la dérivée de x² sin x (variante {i}).", "rubric": "- règle"},
            LONG_EXPLANATION,
        )
    if i % 3 == 1:
        return (
            "short",
            {
                "prompt": f"Quelle est la capitale du pays n° {i} de la liste ?",
                "matchers": [{"kind": "exact", "value": f"Ville {i}"}],
            },
            f"Voir la carte {i}.",
        )
    return (
        "mcq",
        {
            "configVersion": 2,
            "prompt": f"Question {i} : combien font {i % 97} + {i % 89} ?",
            "choices": [
                {"text": str(i % 97 + i % 89), "correct": True},
                {"text": str(i % 97 + i % 89 + 1), "correct": False},
                {"text": str(i % 97 + i % 89 - 1), "correct": False},
            ],
            "mode": "single",
        },
        "On additionne.",
    )


async def night(nats_url: str, n: int) -> list[CompleteReply]:
    nc = await nats_connect(nats_url)
    try:
        llm = LlmClient(nc)
        replies = []
        for i in range(n):
            type_name, config, explanation = question(i)
            replies.append(
                await llm.complete(review_request(type_name, config, explanation, user=None))
            )
        return replies
    finally:
        await nc.drain()


def input_cost(reply: CompleteReply, model: str) -> Decimal:
    """The reply's cost without its output tokens (USD)."""
    out = DEFAULT_PRICES[model].output_usd_per_mtok * reply.usage.output_tokens / 1_000_000
    return reply.usage.cost_usd - out


async def run_gateway(
    d: Path, nats_url: str, stub: AnthropicStub, args: argparse.Namespace, cache: bool
) -> list[CompleteReply]:
    name = "cache" if cache else "nocache"
    env = {
        "NATS_URL": nats_url,
        "DATABASE_URL": f"sqlite:///{d / f'gateway-{name}.db'}",
        "ANTHROPIC_API_KEY": "bench-key",
        "ANTHROPIC_BASE_URL": stub.base_url,
        "PURPOSE_MODELS": f'{{"review": "{args.model}"}}',
        "LLM_GATEWAY_PROMPT_CACHE": "true" if cache else "false",
        "QUIZ_DATA_DIR": str(d / name),
        "LOG_LEVEL": "WARNING",
    }
    stub.reset()  # an empty prompt cache for each run
    gateway = ServiceProcess("quiz_llm_gateway.main", env, d / f"gateway-{name}.log").start()
    try:
        return await night(nats_url, args.questions)
    finally:
        gateway.stop()


async def bench(args: argparse.Namespace) -> None:
    stub = AnthropicStub(default=StubReply.tool({"findings": []}), record_requests=False)
    stub.start()
    with tempfile.TemporaryDirectory(prefix="bench-review-cache-") as tmp:
        d = Path(tmp)
        server = NatsServer(d / "nats").start()
        try:
            cached = await run_gateway(d, server.url, stub, args, cache=True)
            plain = await run_gateway(d, server.url, stub, args, cache=False)
        finally:
            server.stop()
            stub.stop()
    print(f"review night of {args.questions} questions on {args.model}, through the gateway")
    print(" q  type    input tokens plain/read/written   input USD cached   uncached   ratio")
    for i, (c, p) in enumerate(zip(cached, plain, strict=True)):
        u = c.usage
        plain_tokens = u.input_tokens - u.cache_read_input_tokens - u.cache_creation_input_tokens
        assert p.usage.input_tokens == u.input_tokens, "the two runs sent different prompts"
        ci, pi = input_cost(c, args.model), input_cost(p, args.model)
        print(
            f"{i + 1:2}  {question(i)[0]:6}  {plain_tokens:6} / {u.cache_read_input_tokens:5} / "
            f"{u.cache_creation_input_tokens:5}      {ci:.6f}   {pi:.6f}   {ci / pi:.3f}"
        )
    total_c = sum((input_cost(c, args.model) for c in cached), Decimal(0))
    total_p = sum((input_cost(p, args.model) for p in plain), Decimal(0))
    n = len(cached)
    print(
        f"input cost per question: cached {total_c / n:.6f} USD, uncached {total_p / n:.6f} USD; "
        f"with ÷ without caching = {total_c / total_p:.3f} (target ≤ 0.5)"
    )
    print(
        f"whole night (output included): cached {sum(c.usage.cost_usd for c in cached)} USD, "
        f"uncached {sum(p.usage.cost_usd for p in plain)} USD"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--model", default=PLATFORM_DEFAULT_MODEL, choices=sorted(DEFAULT_PRICES))
    asyncio.run(bench(p.parse_args()))


if __name__ == "__main__":
    main()
