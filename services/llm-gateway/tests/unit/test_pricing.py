"""Prices, worst-case estimates and money conversions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.pricing import (
    DEFAULT_PRICES,
    ModelPrice,
    PricingError,
    check_models_priced,
    estimate_input_tokens,
    micros,
    parse_prices,
    usd,
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


def test_unknown_price_is_a_configuration_error_not_zero() -> None:
    with pytest.raises(PricingError, match="claude-unknown"):
        check_models_priced({"poll": "claude-unknown"}, DEFAULT_PRICES)
    with pytest.raises(PricingError, match="not free"):
        parse_prices({"m": {"input": 0, "output": 0}})
    with pytest.raises(PricingError):
        parse_prices({"m": {"input": "3"}})
    assert parse_prices({"m": {"input": "0.25", "output": 1.25}})["m"] == ModelPrice(
        Decimal("0.25"), Decimal("1.25")
    )


def test_gateway_refuses_to_start_with_an_unpriced_purpose_model() -> None:
    settings = Settings(purpose_models={"review": "claude-mystery-9"})
    with pytest.raises(PricingError):
        Gateway.check_settings(settings)
    ok = Settings(
        purpose_models={"review": "claude-mystery-9"},
        model_prices={"claude-mystery-9": {"input": "2", "output": "10"}},
    )
    Gateway.check_settings(ok)


def test_settings_read_plain_adr_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DAILY_CAP_USD", "12.5")
    monkeypatch.setenv("PURPOSE_MODELS", '{"poll": "claude-sonnet-5"}')
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    settings = Settings()
    assert settings.daily_cap_usd == Decimal("12.5")
    assert settings.models()["poll"] == "claude-sonnet-5"
    assert settings.models()["generate"] == "claude-sonnet-4-6"
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
