"""Issue 31 item 5: the fallback table, its chains, residency, and one circuit per model."""

from __future__ import annotations

import pytest

from quiz_llm_gateway.domain.circuit import Circuits, CircuitState
from quiz_llm_gateway.domain.fallback import (
    FallbackError,
    chain,
    fallback_models,
    is_local,
    parse_fallbacks,
)


def test_a_chain_is_the_model_then_its_fallbacks_in_order() -> None:
    table = parse_fallbacks(
        {"claude-sonnet-5-5": ["claude-haiku-4-5", "claude-opus-5-5", "claude-haiku-4-5"]}
    )
    assert table == {"claude-sonnet-5-5": ("claude-haiku-4-5", "claude-opus-5-5")}
    assert chain("claude-sonnet-5-5", table) == (
        "claude-sonnet-5-5",
        "claude-haiku-4-5",
        "claude-opus-5-5",
    )
    # A fallback's own fallbacks are not followed; a model without a list has no fallback.
    assert chain("claude-haiku-4-5", table) == ("claude-haiku-4-5",)
    assert fallback_models(table) == {"claude-haiku-4-5", "claude-opus-5-5"}


@pytest.mark.parametrize(
    "raw",
    [{"m": "n"}, {"m": [""]}, {"m": [3]}, {"m": ["m"]}, {"m": None}],
)
def test_a_bad_table_does_not_start(raw: dict[str, object]) -> None:
    with pytest.raises(FallbackError):
        parse_fallbacks(raw)


def test_under_local_residency_no_fallback_leaves_the_schools_servers() -> None:
    table = parse_fallbacks(
        {"openai-compat/llama": ["claude-haiku-4-5", "openai-compat/qwen", "claude-opus-5-5"]}
    )
    assert is_local("openai-compat/qwen")
    assert not is_local("claude-haiku-4-5")
    assert chain("openai-compat/llama", table, local_only=True) == (
        "openai-compat/llama",
        "openai-compat/qwen",
    )
    # The purpose's own model stays first: refusing a model that is not local is the
    # residency check's, before any chain; none of its fallbacks leaves either.
    assert chain(
        "claude-sonnet-5-5", {"claude-sonnet-5-5": ("claude-haiku-4-5",)}, local_only=True
    ) == ("claude-sonnet-5-5",)
    assert not is_local("openai-compat/")


def test_each_model_has_its_own_circuit() -> None:
    circuits = Circuits(failure_threshold=2, cooldown_s=30.0)
    sonnet, haiku = circuits.of("claude-sonnet-5-5"), circuits.of("claude-haiku-4-5")
    sonnet.record_failure(0.0)
    sonnet.record_failure(1.0)
    assert not sonnet.allow(2.0)
    assert haiku.allow(2.0)  # one model's outage never stops another
    assert circuits.of("claude-sonnet-5-5") is sonnet
    assert circuits.worst(2.0) is CircuitState.open
    assert circuits.worst(2.0, ["claude-haiku-4-5"]) is CircuitState.closed
    assert circuits.worst(31.0, ["claude-sonnet-5-5"]) is CircuitState.half_open
    assert Circuits().worst(0.0) is CircuitState.closed
