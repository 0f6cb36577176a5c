"""Which provider runs a model, whether it is local, and the prices of self-hosted models.

Issue 31: a model id `openai-compat/<model>` (PURPOSE_MODELS) is served by the self-hosted
OpenAI-compatible server at OPENAI_COMPAT_BASE_URL (vLLM, llama.cpp's server, Ollama,
LocalAI); every other id by Anthropic. Only the former is local: with
`LLM_DATA_RESIDENCY=local` nothing else is ever called, and no fallback crosses to a model
that `is_local` refuses. Pure: no I/O, no settings read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal
from urllib.parse import urlsplit

from quiz_llm_gateway.domain.pricing import ModelPrice, PricingError

ProviderKind = Literal["anthropic", "openai-compat"]
Residency = Literal["any", "local"]

ANTHROPIC: ProviderKind = "anthropic"
OPENAI_COMPAT: ProviderKind = "openai-compat"
# The prefix that routes a model id to the OpenAI-compatible provider; the rest is the id the
# server knows (`openai-compat/gemma3:270m` → `gemma3:270m` for Ollama).
OPENAI_COMPAT_PREFIX = "openai-compat/"

# The setting names messages quote (a refusal must say what to change).
RESIDENCY_SETTING = "LLM_DATA_RESIDENCY"
PRICES_SETTING = "LLM_MODEL_PRICES"
BASE_URL_SETTING = "OPENAI_COMPAT_BASE_URL"


def provider_kind(model: str) -> ProviderKind:
    """`openai-compat` for `openai-compat/<model>`, else `anthropic` (claude-*, and any other
    id, which only the Anthropic provider could be asked for)."""
    return OPENAI_COMPAT if model.startswith(OPENAI_COMPAT_PREFIX) else ANTHROPIC


def is_local(model: str) -> bool:
    """Whether `model` runs on the school's own server (an OpenAI-compatible base URL).

    Anthropic is never local. A fallback chain keeps only models this admits when
    LLM_DATA_RESIDENCY=local (`domain.fallback.chain`), so no fallback leaves the school's
    servers.
    """
    return provider_kind(model) == OPENAI_COMPAT and len(model) > len(OPENAI_COMPAT_PREFIX)


def wire_model(model: str) -> str:
    """The id sent to the provider: `openai-compat/llama3` → `llama3`; others unchanged."""
    if provider_kind(model) == OPENAI_COMPAT:
        return model[len(OPENAI_COMPAT_PREFIX) :]
    return model


def residency_refused(model: str, residency: Residency) -> bool:
    """Whether residency forbids calling `model`: under `local`, every non-local model."""
    return residency == "local" and not is_local(model)


def residency_message(purpose: str, model: str) -> str:
    """The refusal of a purpose whose model may not be called under LLM_DATA_RESIDENCY=local."""
    return (
        f"purpose {purpose!r} uses {model!r}, which is not a local model, and "
        f"{RESIDENCY_SETTING}=local lets only a self-hosted OpenAI-compatible server be called: "
        f"set PURPOSE_MODELS[{purpose!r}] to 'openai-compat/<model>' (served at "
        f"{BASE_URL_SETTING})"
    )


def refused_purposes(models: Mapping[str, str], residency: Residency) -> dict[str, str]:
    """Purpose → model of every purpose residency refuses (empty under `any`)."""
    return {p: m for p, m in sorted(models.items()) if residency_refused(m, residency)}


def display_name(kind: ProviderKind, base_url: str | None, name: str | None = None) -> str:
    """Who runs a model, as pages name it: "Anthropic", or the self-hosted server's `name`
    (OPENAI_COMPAT_PROVIDER_NAME), else its base URL's host (`http://llm.school.ch:8000/v1`
    → `llm.school.ch`): a proper name, the same in every language."""
    if kind == ANTHROPIC:
        return "Anthropic"
    if name:
        return name
    host = urlsplit(base_url or "").hostname
    return host or "self-hosted"


def parse_price_pairs(raw: Mapping[str, Any]) -> dict[str, ModelPrice]:
    """Read LLM_MODEL_PRICES, `{"model": [input, output]}` in USD per million tokens.

    Unlike MODEL_PRICES an explicit 0 is accepted: a school's own server costs nothing per
    token (its hardware is paid otherwise), and saying so is a decision, not a missing price.
    PricingError names the setting and the model for anything but two non-negative numbers.
    """
    prices: dict[str, ModelPrice] = {}
    for model, pair in raw.items():
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float | str) for v in pair)
        ):
            raise PricingError(
                f"{PRICES_SETTING}[{model!r}] must be [input, output] USD per million tokens"
            )
        try:
            prices[model] = ModelPrice(Decimal(str(pair[0])), Decimal(str(pair[1])))
        except (InvalidOperation, PricingError) as e:
            raise PricingError(f"{PRICES_SETTING}[{model!r}]: {e}") from None
    return prices


def check_local_models_priced(
    models: Mapping[str, str], explicit: Mapping[str, ModelPrice]
) -> None:
    """Refuse to start when an `openai-compat/` model has no explicit price (`explicit`:
    LLM_MODEL_PRICES over MODEL_PRICES).

    Self-hosted models have no list price to fall back on, so each needs its own (0 allowed).
    """
    missing = sorted({m for m in models.values() if is_local(m) and m not in explicit})
    if missing:
        raise PricingError(
            f"no price for self-hosted model(s) {', '.join(missing)}: set {PRICES_SETTING}, "
            'e.g. {"' + missing[0] + '": [0, 0]} (USD per million input and output tokens)'
        )


def unusable(purpose: str, model: str, residency: Residency, served: bool) -> str | None:
    """Why `purpose` cannot call `model` here (the `llm_not_configured` message), None if it
    can: residency refuses it first (a key being set changes nothing), then a provider with no
    key or base URL."""
    if residency_refused(model, residency):
        return residency_message(purpose, model)
    if not served:
        setting = BASE_URL_SETTING if provider_kind(model) == OPENAI_COMPAT else "ANTHROPIC_API_KEY"
        return f"no LLM provider is configured for {model!r}: set {setting} for the llm-gateway"
    return None
