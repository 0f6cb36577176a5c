"""Who the poll's AI notices name (issues 34, 31): read from the gateway's availability reply.

The gateway answers `llm.v1.availability` with the model it calls per purpose
(`AvailabilityReply.models`) and who runs it (`AvailabilityReply.providers`: `Anthropic`, or
the school's own OpenAI-compatible server by its configured name, issue 31); the poll's notices
("an AI model (…) reads the ideas") name that provider rather than a fixed one. A gateway older
than issue 31 sends no providers: the model id's family names it then (`claude-…`). The pages
say "demo" when the gateway is the demo's canned replies (`make run DEMO=1`: README "Demo
mode", every purpose's model id is `demo-canned-replies`).
"""

from __future__ import annotations

from dataclasses import dataclass

# The model id the demo's gateway reports for every purpose (README "Demo mode";
# quiz_testkit.demo_replies.DEMO_MODEL, which a service may not import).
DEMO_MODEL = "demo-canned-replies"

# A model id's family → who runs it, for a gateway that does not say (no `providers`); an id the
# table does not know names no provider (the pages then name the model itself).
_PROVIDERS = (("claude-", "Anthropic"),)


@dataclass(frozen=True, slots=True)
class ModelSight:
    """What the gateway said of purpose poll: a model can be called, and which one."""

    available: bool
    model: str | None = None
    reason: str | None = None  # the gateway's why-not: llm_not_configured, …; None unreachable
    # Who runs `model` as the gateway names it (AvailabilityReply.providers); None: not said.
    named: str | None = None

    @property
    def demo(self) -> bool:
        """The gateway answers with the demo's canned replies, not a model."""
        return self.model == DEMO_MODEL

    @property
    def provider(self) -> str | None:
        """Who runs `model`: the gateway's name for it, else its id's family ("Anthropic" for
        `claude-…`); None for the demo or unknown."""
        if self.demo:
            return None
        return self.named or provider_of(self.model)


NO_MODEL = ModelSight(available=False)


def provider_of(model: str | None) -> str | None:
    """ "Anthropic" for `claude-haiku-4-5`; None for the demo's id, an unknown id or None."""
    if not model or model == DEMO_MODEL:
        return None
    for prefix, provider in _PROVIDERS:
        if model.lower().startswith(prefix):
            return provider
    return None


# How to get a model, said by every "no model" refusal (issue 34): the key's name, the
# self-hosted server's setting (issue 31) and the demo.
HOW_TO_GET_ONE = (
    "set ANTHROPIC_API_KEY (or OPENAI_COMPAT_BASE_URL for a self-hosted model) for the "
    "llm-gateway, or start `make run DEMO=1` for the demo's canned replies"
)

# The poll's own reason when the gateway refuses purpose poll under LLM_DATA_RESIDENCY=local
# (the gateway says llm_not_configured and residency "local"): the fix is another model.
RESIDENCY_LOCAL = "residency_local"


def no_model_message(reason: str | None) -> str:
    """The `llm_unavailable` refusal of the AI switch, saying why when the gateway said it and
    how to get a model: "No model can be called right now: no provider key is configured; set
    ANTHROPIC_API_KEY …". `reason`: the gateway's `AvailabilityReply.reason` (None: not asked,
    or nobody answered)."""
    why = {
        "llm_not_configured": "no provider key is configured",
        "llm_budget_exhausted": "today's model budget is spent (it renews tomorrow)",
        "llm_failed": "the provider is failing and the gateway paused its calls; try again soon",
        RESIDENCY_LOCAL: (
            "the llm-gateway may call only self-hosted models (LLM_DATA_RESIDENCY=local) and "
            "the poll's model is not one; set PURPOSE_MODELS['poll'] to 'openai-compat/<model>'"
        ),
    }.get(reason or "", "the llm-gateway does not answer")
    if reason in ("llm_budget_exhausted", "llm_failed", RESIDENCY_LOCAL):
        return f"No model can be called right now: {why}."
    return f"No model can be called right now: {why}; {HOW_TO_GET_ONE}."
