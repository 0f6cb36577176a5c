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


def test_a_dated_snapshot_of_a_listed_model_takes_its_price() -> None:
    listed = {"claude-sonnet-5": ModelPrice(Decimal("2"), Decimal("10"))}
    assert price_for("claude-sonnet-5-20260115", listed) == listed["claude-sonnet-5"]
    assert price_for("claude-sonnet-5", listed) == listed["claude-sonnet-5"]
    # Only a date: another model whose id extends a listed one keeps no price of its own.
    assert price_for("claude-sonnet-5-5", listed) is None
    assert price_for("claude-sonnet-5-2026011", listed) is None
    assert price_for("claude-sonnet-5-20261399", listed) is None
    assert price_for("claude-sonnet-5-20260115-preview", listed) is None
    assert price_for("claude-opus-5-20260115", listed) is None
    # A snapshot listed with its own price keeps it.
    own = {**listed, "claude-sonnet-5-20260115": ModelPrice(Decimal("1"), Decimal("1"))}
    assert price_for("claude-sonnet-5-20260115", own) == own["claude-sonnet-5-20260115"]
    check_models_priced({"review": "claude-sonnet-5-20260115"}, listed)
    with pytest.raises(PricingError, match="claude-sonnet-5-5"):
        check_models_priced({"review": "claude-sonnet-5-5"}, listed)
    prices = with_snapshots({"review": "claude-sonnet-5-20260115", "poll": "x-9"}, listed)
    assert prices["claude-sonnet-5-20260115"] == listed["claude-sonnet-5"]
    assert "x-9" not in prices


def test_a_replica_starts_on_a_providers_new_snapshot_name() -> None:
    # A snapshot no built-in price names: the gateway prices it as its listed model.
    settings = Settings(purpose_models={"review": "claude-sonnet-4-6-20260301"})
    Gateway.check_settings(settings)
    prices = with_snapshots(settings.models(), DEFAULT_PRICES)
    assert prices["claude-sonnet-4-6-20260301"] == DEFAULT_PRICES["claude-sonnet-4-6"]
