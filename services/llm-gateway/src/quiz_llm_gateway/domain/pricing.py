"""Prices and worst-case cost: integer micro-dollars, never float."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
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


# List prices (USD per MTok, platform.claude.com model pages) of models that accept a forced
# tool_choice; extend or override with MODEL_PRICES. Sonnet 5.5 refuses forced tool use (400),
# Haiku 5.5 prices by prompt length: neither is a default.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-haiku-4-5": ModelPrice(Decimal("1"), Decimal("5")),
    "claude-haiku-4-5-20251001": ModelPrice(Decimal("1"), Decimal("5")),
    "claude-sonnet-4-6": ModelPrice(Decimal("3"), Decimal("15")),
    "claude-sonnet-5": ModelPrice(Decimal("2"), Decimal("10")),
    "claude-sonnet-4-5": ModelPrice(Decimal("3"), Decimal("15")),
    "claude-sonnet-4-5-20250929": ModelPrice(Decimal("3"), Decimal("15")),
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


# A provider's snapshot of a model: the model's id, "-", the snapshot's date as YYYYMMDD.
_DATED = re.compile(r"(?P<base>.+)-(?P<date>\d{8})")


def price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """`model`'s price: its own entry, else — for a dated snapshot `<listed id>-YYYYMMDD`
    (`claude-sonnet-4-5-20250929` of `claude-sonnet-4-5`) — the listed model's; None otherwise.

    The platform gives any `<listed id>-…` the listed price; only a date suffix does here:
    `claude-sonnet-5-5` (another model, another price) must not pass for `claude-sonnet-5`.
    A date that is not a calendar day (`…-20251399`) is no snapshot.
    """
    if model in prices:
        return prices[model]
    dated = _DATED.fullmatch(model)
    if dated is None or dated["base"] not in prices:
        return None
    try:
        datetime.strptime(dated["date"], "%Y%m%d")
    except ValueError:
        return None
    return prices[dated["base"]]


def check_models_priced(models: dict[str, str], prices: Mapping[str, ModelPrice]) -> None:
    """Refuse to start when a purpose's model has no price (its own, or its dated base's)."""
    missing = sorted({m for m in models.values() if price_for(m, prices) is None})
    if missing:
        raise PricingError(f"no price for model(s) {', '.join(missing)}: set MODEL_PRICES")


def with_snapshots(
    models: dict[str, str], prices: Mapping[str, ModelPrice]
) -> dict[str, ModelPrice]:
    """`prices` plus an entry for each purpose's model priced through its dated base, so a
    replica starts on a provider's new snapshot name (PURPOSE_MODELS) without MODEL_PRICES."""
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
