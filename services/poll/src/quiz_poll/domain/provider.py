"""Who the poll's AI notices name (issue 34): read from the model the gateway reports.

The gateway answers `llm.v1.availability` with the model it calls per purpose
(`AvailabilityReply.models`); the poll's notices ("an AI model (…) reads the ideas") name that
model's provider rather than a fixed one, and the pages say "demo" when the gateway is the
demo's canned replies (`make run DEMO=1`: README "Demo mode", every purpose's model id is
`demo-canned-replies`).
"""

from __future__ import annotations

from dataclasses import dataclass

# The model id the demo's gateway reports for every purpose (README "Demo mode";
# quiz_testkit.demo_replies.DEMO_MODEL, which a service may not import).
DEMO_MODEL = "demo-canned-replies"

# A model id's family → who runs it. The gateway speaks Anthropic's Messages API; an id the
# table does not know names no provider (the pages then name the model itself).
_PROVIDERS = (("claude-", "Anthropic"),)


@dataclass(frozen=True, slots=True)
class ModelSight:
    """What the gateway said of purpose poll: a model can be called, and which one."""

    available: bool
    model: str | None = None
    reason: str | None = None  # the gateway's why-not: llm_not_configured, …; None unreachable

    @property
    def demo(self) -> bool:
        """The gateway answers with the demo's canned replies, not a model."""
        return self.model == DEMO_MODEL

    @property
    def provider(self) -> str | None:
        """The provider of `model` ("Anthropic" for `claude-…`); None for the demo or unknown."""
        return provider_of(self.model)


NO_MODEL = ModelSight(available=False)


def provider_of(model: str | None) -> str | None:
    """ "Anthropic" for `claude-haiku-4-5`; None for the demo's id, an unknown id or None."""
    if not model or model == DEMO_MODEL:
        return None
    for prefix, provider in _PROVIDERS:
        if model.lower().startswith(prefix):
            return provider
    return None


# How to get a model, said by every "no model" refusal (issue 34): the key's name and the demo.
HOW_TO_GET_ONE = (
    "set ANTHROPIC_API_KEY for the llm-gateway, or start `make run DEMO=1` for the demo's "
    "canned replies"
)


def no_model_message(reason: str | None) -> str:
    """The `llm_unavailable` refusal of the AI switch, saying why when the gateway said it and
    how to get a model: "No model can be called right now: no provider key is configured; set
    ANTHROPIC_API_KEY …". `reason`: the gateway's `AvailabilityReply.reason` (None: not asked,
    or nobody answered)."""
    why = {
        "llm_not_configured": "no provider key is configured",
        "llm_budget_exhausted": "today's model budget is spent (it renews tomorrow)",
        "llm_failed": "the provider is failing and the gateway paused its calls; try again soon",
    }.get(reason or "", "the llm-gateway does not answer")
    if reason in ("llm_budget_exhausted", "llm_failed"):
        return f"No model can be called right now: {why}."
    return f"No model can be called right now: {why}; {HOW_TO_GET_ONE}."
