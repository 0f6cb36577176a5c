"""Prices and worst-case cost: integer micro-dollars, never float."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from quiz_llm_gateway.domain.money import check_usd

MICROS_PER_USD = 1_000_000
TOKENS_PER_MILLION = 1_000_000

# Tokens the provider adds around a request: the tool-use system prompt (documented at ~350
# tokens for a forced tool), role markers per message, the system block. Over-counted on purpose.
REQUEST_OVERHEAD_TOKENS = 600
PER_MESSAGE_OVERHEAD_TOKENS = 16


class PricingError(ValueError):
    """A model is configured without a price: a start-up error, never a $0 call."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million input and output tokens."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal

    def __post_init__(self) -> None:
        # A negative or non-finite price would make a negative or infinite cost (issue 29).
        try:
            check_usd("input price", self.input_usd_per_mtok)
            check_usd("output price", self.output_usd_per_mtok)
        except ValueError as e:
            raise PricingError(str(e)) from None

    def cost_micros(self, input_tokens: int, output_tokens: int) -> int:
        """Cost in micro-dollars, rounded up so rounding never undercounts."""
        usd = (
            Decimal(input_tokens) * self.input_usd_per_mtok
            + Decimal(output_tokens) * self.output_usd_per_mtok
        ) / TOKENS_PER_MILLION
        return int((usd * MICROS_PER_USD).to_integral_value(rounding=ROUND_CEILING))


# The platform's closed list (FACTS E/E2, `LLM_MODELS`): its three models at its list prices;
# claude-sonnet-5-5 is its default model (`DEFAULT_LLM_MODEL`).
PLATFORM_PRICES: dict[str, ModelPrice] = {
    "claude-sonnet-5-5": ModelPrice(Decimal("2"), Decimal("10")),
    "claude-opus-5-5": ModelPrice(Decimal("4"), Decimal("20")),
    "claude-haiku-4-5": ModelPrice(Decimal("1"), Decimal("5")),
}
PLATFORM_DEFAULT_MODEL = "claude-sonnet-5-5"

# The platform's list plus other Anthropic models at their list prices (USD per MTok,
# platform.claude.com model pages), so PURPOSE_MODELS may still name them; extend or override
# with MODEL_PRICES. `claude-sonnet-5` is left out on purpose: as a prefix of
# `claude-sonnet-5-5` it would price ids the platform prices as the dearest
# (`claude-sonnet-5-520260101`, a date without its dash) at its own price.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    **PLATFORM_PRICES,
    "claude-sonnet-4-6": ModelPrice(Decimal("3"), Decimal("15")),
    "claude-sonnet-4-5": ModelPrice(Decimal("3"), Decimal("15")),
}


def parse_prices(raw: dict[str, Any]) -> dict[str, ModelPrice]:
    """Read `{model: {"input": usd_per_mtok, "output": usd_per_mtok}}` as exact decimals."""
    prices: dict[str, ModelPrice] = {}
    for model, entry in raw.items():
        try:
            price = ModelPrice(Decimal(str(entry["input"])), Decimal(str(entry["output"])))
        except PricingError as exc:
            raise PricingError(f"price of {model!r}: {exc}") from None
        except (KeyError, TypeError, ArithmeticError) as exc:
            raise PricingError(f"price of {model!r} needs numeric 'input' and 'output'") from exc
        if price.input_usd_per_mtok == 0 and price.output_usd_per_mtok == 0:
            raise PricingError(f"price of {model!r} is $0: an unknown price is not free")
        prices[model] = price
    return prices


def is_anthropic(model: str) -> bool:
    """Whether `model` is an Anthropic id (sent to the Messages API as is): one without a
    provider prefix. `openai-compat/<model>` ids (issue 31, a self-hosted server) are not."""
    return "/" not in model


def listed_model(model: str, prices: Mapping[str, ModelPrice]) -> str | None:
    """The listed id whose price `model` takes: itself, else the longest listed id that
    `model` starts with followed by "-" (a dated variant, `claude-opus-5-5-20260301` of
    `claude-opus-5-5`, whatever follows the dash: FACTS E2); None for any other id."""
    if model in prices:
        return model
    variants = [m for m in prices if model.startswith(f"{m}-")]
    return max(variants, key=len) if variants else None


def dearest(prices: Mapping[str, ModelPrice]) -> ModelPrice:
    """The price an unknown Anthropic id is held at (FACTS E2: "any other id takes the dearest
    price"): the highest input and the highest output price of the listed Anthropic models —
    with the defaults, claude-opus-5-5's $4/$20, the platform's dearest. Taken per component
    so no listed model costs more for any mix of tokens."""
    listed = [p for m, p in prices.items() if is_anthropic(m)] or list(PLATFORM_PRICES.values())
    return ModelPrice(
        max(p.input_usd_per_mtok for p in listed), max(p.output_usd_per_mtok for p in listed)
    )


def price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """`model`'s price: its own entry, else its listed model's (a dated variant), else — for
    an Anthropic id — the dearest (FACTS E2: the estimate errs on the side of the cap); None
    for a model of another provider that has no entry of its own (`openai-compat/…`: its
    price must be configured, never guessed)."""
    listed = listed_model(model, prices)
    if listed is not None:
        return prices[listed]
    return dearest(prices) if is_anthropic(model) else None


def check_models_priced(models: Mapping[str, str], prices: Mapping[str, ModelPrice]) -> None:
    """Refuse to start when a purpose's model has no price: only a model of another provider
    without its own entry (an Anthropic id always has one: its own, its listed model's, or
    the dearest)."""
    missing = sorted({m for m in models.values() if price_for(m, prices) is None})
    if missing:
        raise PricingError(f"no price for model(s) {', '.join(missing)}: set MODEL_PRICES")


def with_snapshots(
    models: Mapping[str, str], prices: Mapping[str, ModelPrice]
) -> dict[str, ModelPrice]:
    """`prices` plus an entry for each purpose's model priced through `price_for` (a dated
    variant, an unknown Anthropic id at the dearest), so the call path looks prices up by id."""
    out = dict(prices)
    for model in models.values():
        price = price_for(model, prices)
        if price is not None:
            out.setdefault(model, price)
    return out


def estimate_input_tokens(
    system: str | None, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> int:
    """An upper bound of input tokens: a byte-level tokenizer makes no more tokens than bytes."""
    size = len((system or "").encode())
    for message in messages:
        content = message["content"]
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        size += len(text.encode()) + PER_MESSAGE_OVERHEAD_TOKENS
    if tools:
        size += len(json.dumps(tools, ensure_ascii=False).encode())
    return size + REQUEST_OVERHEAD_TOKENS


def worst_case_micros(price: ModelPrice, input_tokens_bound: int, max_output_tokens: int) -> int:
    """The most a request can cost: the input bound plus every output token allowed."""
    return price.cost_micros(input_tokens_bound, max_output_tokens)


def usd(micros: int) -> Decimal:
    """Micro-dollars as an exact Decimal of USD."""
    return (Decimal(micros) / MICROS_PER_USD).quantize(Decimal("0.000001"))


def micros(amount_usd: Decimal | str | int) -> int:
    """USD (Decimal or string) as integer micro-dollars, rounded down (a cap never grows)."""
    return int(Decimal(str(amount_usd)) * MICROS_PER_USD)
