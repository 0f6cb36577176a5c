"""Who the poll's notices name, and what its "no model" refusal says (issue 34).

The provider is read from the model id the gateway reports for purpose poll; the demo's id
(`demo-canned-replies`, README "Demo mode") is no provider but the demo; the AI switch's
`llm_unavailable` refusal names ANTHROPIC_API_KEY and `make run DEMO=1` where they help.
"""

from __future__ import annotations

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import PollRevealBody
from quiz_poll.domain.marks import default_settings
from quiz_poll.domain.provider import (
    DEMO_MODEL,
    NO_MODEL,
    RESIDENCY_LOCAL,
    ModelSight,
    provider_of,
)
from quiz_poll.domain.views import apply_switches


def test_a_claude_model_is_anthropics_and_an_unknown_id_names_nobody() -> None:
    assert provider_of("claude-haiku-4-5") == "Anthropic"
    assert provider_of("Claude-3-opus") == "Anthropic"
    assert provider_of("gpt-4o") is None
    assert provider_of(None) is None


def test_the_demos_model_is_the_demo_and_no_provider() -> None:
    assert DEMO_MODEL == "demo-canned-replies"  # the id README's "Demo mode" documents
    demo = ModelSight(available=True, model=DEMO_MODEL)
    assert demo.demo and demo.provider is None
    real = ModelSight(available=True, model="claude-haiku-4-5")
    assert not real.demo and real.provider == "Anthropic"
    assert not NO_MODEL.available and not NO_MODEL.demo and NO_MODEL.model is None


def refusal(reason: str | None) -> str:
    body = PollRevealBody(ai=True)
    with pytest.raises(ContractError) as refused:
        apply_switches(
            default_settings(True),
            body,
            ai_available=False,
            frozen=False,
            unavailable_reason=reason,
        )
    assert refused.value.code == ErrorCode.llm_unavailable
    return refused.value.message


@pytest.mark.parametrize("reason", [None, "llm_not_configured"])
def test_no_key_or_no_gateway_says_how_to_get_a_model(reason: str | None) -> None:
    message = refusal(reason)
    assert message.startswith("No model can be called right now: ")
    assert "ANTHROPIC_API_KEY" in message and "`make run DEMO=1`" in message
    if reason == "llm_not_configured":
        assert "no provider key is configured" in message


@pytest.mark.parametrize(
    ("reason", "said"),
    [("llm_budget_exhausted", "budget is spent"), ("llm_failed", "provider is failing")],
)
def test_a_spent_budget_or_a_failing_provider_says_so_and_no_key_is_asked(
    reason: str, said: str
) -> None:
    message = refusal(reason)
    assert said in message and "ANTHROPIC_API_KEY" not in message


def test_the_gateways_name_for_the_provider_wins_over_the_ids_family() -> None:
    """Issue 31: a self-hosted model is named as the gateway names its server."""
    local = ModelSight(available=True, model="openai-compat/gemma3", named="llm.school.ch")
    assert local.provider == "llm.school.ch"
    assert ModelSight(available=True, model="claude-haiku-4-5", named="Anthropic").provider == (
        "Anthropic"
    )
    # An older gateway names none: the id's family still does, and the demo is no provider.
    assert ModelSight(available=True, model="openai-compat/gemma3").provider is None
    assert ModelSight(available=True, model=DEMO_MODEL, named="Anthropic").provider is None


def test_a_purpose_refused_by_local_residency_says_which_setting_and_asks_no_key() -> None:
    message = refusal(RESIDENCY_LOCAL)
    assert "LLM_DATA_RESIDENCY=local" in message and "openai-compat/<model>" in message
    assert "ANTHROPIC_API_KEY" not in message
