"""Prices, worst-case estimates and money conversions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.pricing import (
    DEFAULT_PRICES,
    PLATFORM_DEFAULT_MODEL,
    PLATFORM_PRICES,
    ModelPrice,
    PricingError,
    check_models_priced,
    dearest,
    estimate_input_tokens,
    listed_model,
    micros,
    parse_prices,
    price_for,
    usd,
    with_snapshots,
    worst_case_micros,
)
from quiz_llm_gateway.service import Gateway


def test_cost_is_integer_micros_rounded_up() -> None:
    sonnet = ModelPrice(Decimal("3"), Decimal("15"))
    assert sonnet.cost_micros(1_000_000, 0) == 3_000_000
    assert sonnet.cost_micros(0, 1_000) == 15_000
    # 1 input token at $3/MTok is 3 micro-dollars exactly; at $1/MTok a third of a token rounds up.
    assert sonnet.cost_micros(1, 0) == 3
    assert ModelPrice(Decimal("0.3"), Decimal("0")).cost_micros(1, 0) == 1


def test_worst_case_counts_every_allowed_output_token() -> None:
    haiku = DEFAULT_PRICES["claude-haiku-4-5"]
    assert worst_case_micros(haiku, 1000, 2000) == 1000 * 1 + 2000 * 5


def test_input_bound_is_at_least_the_utf8_bytes() -> None:
    text = "Qu'est-ce que la photosynthèse ? 光合作用 🌱"
    bound = estimate_input_tokens("sys", [{"role": "user", "content": text}], None)
    assert bound >= len(text.encode()) + len(b"sys")
    with_tool = estimate_input_tokens(
        "sys", [{"role": "user", "content": text}], [{"name": "x", "input_schema": {}}]
    )
    assert with_tool > bound


def test_an_unknown_anthropic_id_takes_the_dearest_price_never_zero() -> None:
    # FACTS E2: "any other id takes the dearest price" (the estimate errs on the cap's side).
    assert price_for("claude-unknown", DEFAULT_PRICES) == ModelPrice(Decimal("4"), Decimal("20"))
    check_models_priced({"poll": "claude-unknown"}, DEFAULT_PRICES)
    # Another provider's model is never guessed: its price must be configured.
    assert price_for("openai-compat/llama-3", DEFAULT_PRICES) is None
    with pytest.raises(PricingError, match="openai-compat/llama-3"):
        check_models_priced({"poll": "openai-compat/llama-3"}, DEFAULT_PRICES)
    with pytest.raises(PricingError, match="not free"):
        parse_prices({"m": {"input": 0, "output": 0}})
    with pytest.raises(PricingError):
        parse_prices({"m": {"input": "3"}})
    assert parse_prices({"m": {"input": "0.25", "output": 1.25}})["m"] == ModelPrice(
        Decimal("0.25"), Decimal("1.25")
    )


def test_the_dearest_is_per_component_over_the_listed_anthropic_models() -> None:
    prices = {
        "claude-a": ModelPrice(Decimal("10"), Decimal("5")),
        "claude-b": ModelPrice(Decimal("1"), Decimal("30")),
        "openai-compat/big": ModelPrice(Decimal("99"), Decimal("99")),
    }
    assert dearest(prices) == ModelPrice(Decimal("10"), Decimal("30"))


def test_gateway_refuses_to_start_with_an_unpriced_purpose_model() -> None:
    settings = Settings(purpose_models={"review": "openai-compat/mystery-9"})
    with pytest.raises(PricingError):
        Gateway.check_settings(settings)
    ok = Settings(
        purpose_models={"review": "openai-compat/mystery-9"},
        model_prices={"openai-compat/mystery-9": {"input": "2", "output": "10"}},
    )
    Gateway.check_settings(ok)


def test_settings_read_plain_adr_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DAILY_CAP_USD", "12.5")
    monkeypatch.setenv("PURPOSE_MODELS", '{"poll": "claude-sonnet-5"}')
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    settings = Settings()
    assert settings.daily_cap_usd == Decimal("12.5")
    assert settings.models()["poll"] == "claude-sonnet-5"
    assert settings.models()["generate"] == "claude-sonnet-5-5"  # the platform's default
    assert settings.anthropic_api_key == "k"


def test_default_models_poll_is_haiku_others_sonnet() -> None:
    models = Settings().models()
    assert "haiku" in models["poll"]
    assert all("sonnet" in m for p, m in models.items() if p != "poll")


def test_money_conversions_are_exact() -> None:
    assert micros("20") == 20_000_000
    assert micros(Decimal("0.0000019")) == 1
    assert usd(1) == Decimal("0.000001")
    assert str(usd(12_345_678)) == "12.345678"


def test_a_dated_variant_of_a_listed_model_takes_its_price() -> None:
    # FACTS E2: "an id that starts with a listed id plus '-' takes that model's price",
    # whatever follows the dash.
    listed = {"claude-haiku-4-5": ModelPrice(Decimal("1"), Decimal("5"))}
    assert price_for("claude-haiku-4-5-20251001", listed) == listed["claude-haiku-4-5"]
    assert price_for("claude-haiku-4-5-latest", listed) == listed["claude-haiku-4-5"]
    assert price_for("claude-haiku-4-5", listed) == listed["claude-haiku-4-5"]
    # No dash after the listed id: another id, the dearest.
    assert (
        price_for("claude-haiku-4-520251001", DEFAULT_PRICES) == DEFAULT_PRICES["claude-opus-5-5"]
    )
    # A variant listed with its own price keeps it.
    own = {**listed, "claude-haiku-4-5-20251001": ModelPrice(Decimal("2"), Decimal("2"))}
    assert price_for("claude-haiku-4-5-20251001", own) == own["claude-haiku-4-5-20251001"]
    # The longest listed prefix wins: a variant of sonnet-5-5 is never priced as sonnet-5.
    both = {
        "claude-sonnet-5": ModelPrice(Decimal("3"), Decimal("15")),
        "claude-sonnet-5-5": ModelPrice(Decimal("2"), Decimal("10")),
    }
    assert price_for("claude-sonnet-5-5-20260115", both) == both["claude-sonnet-5-5"]
    assert listed_model("claude-sonnet-5-7", both) == "claude-sonnet-5"
    prices = with_snapshots(
        {"review": "claude-haiku-4-5-20251001", "poll": "openai-compat/x-9"}, listed
    )
    assert prices["claude-haiku-4-5-20251001"] == listed["claude-haiku-4-5"]
    assert "openai-compat/x-9" not in prices


def test_the_defaults_are_the_platforms_models_and_prices() -> None:
    assert PLATFORM_DEFAULT_MODEL == "claude-sonnet-5-5"
    assert {
        m: (p.input_usd_per_mtok, p.output_usd_per_mtok) for m, p in PLATFORM_PRICES.items()
    } == {
        "claude-sonnet-5-5": (2, 10),
        "claude-opus-5-5": (4, 20),
        "claude-haiku-4-5": (1, 5),
    }
    assert all(DEFAULT_PRICES[m] == p for m, p in PLATFORM_PRICES.items())


def test_fallback_models_are_priced_and_checked_at_start() -> None:
    Gateway.check_settings(Settings(fallback_models={"claude-sonnet-5-5": ["claude-haiku-4-5"]}))
    # Another provider's fallback needs its own price, like a purpose's model.
    with pytest.raises(PricingError, match="openai-compat/llama"):
        Gateway.check_settings(
            Settings(fallback_models={"claude-sonnet-5-5": ["openai-compat/llama"]})
        )
    with pytest.raises(ValueError):
        Gateway.check_settings(Settings(fallback_models={"claude-sonnet-5-5": "claude-haiku-4-5"}))


def test_a_replica_starts_on_a_providers_new_snapshot_name() -> None:
    # A snapshot no built-in price names: the gateway prices it as its listed model.
    settings = Settings(purpose_models={"review": "claude-sonnet-4-6-20260301"})
    Gateway.check_settings(settings)
    prices = with_snapshots(settings.models(), DEFAULT_PRICES)
    assert prices["claude-sonnet-4-6-20260301"] == DEFAULT_PRICES["claude-sonnet-4-6"]
