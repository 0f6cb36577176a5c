"""Which model answers when a model cannot (issue 31 item 5). Pure.

`LLM_FALLBACK_MODELS='{"claude-sonnet-5-5": ["claude-haiku-4-5"]}'`: after a model's retries
on 429/529/5xx (or with its circuit open) the call goes to the next model of its chain, under
the same call and request id, its hold checked again at that model's price. A chain is the
model then its fallbacks in order, each named once; a fallback's own fallbacks are not
followed (one list per model says the whole order).

Data residency (issue 31 item 4, `LLM_DATA_RESIDENCY=local`): no fallback may cross to a
provider that is not local (`domain.providers.is_local`: a model served by the OpenAI-compatible
provider, `openai-compat/<model>`, a server the school runs itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quiz_llm_gateway.domain.providers import is_local


class FallbackError(ValueError):
    """A fallback table that must not start (a start-up error)."""


def parse_fallbacks(raw: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """`{model: [fallback, …]}` as tuples; FallbackError for a list that is not a list of
    non-empty ids, or one that names its own model."""
    table: dict[str, tuple[str, ...]] = {}
    for model, chain in raw.items():
        if not isinstance(chain, list) or not all(isinstance(m, str) and m for m in chain):
            raise FallbackError(f"LLM_FALLBACK_MODELS[{model!r}] must be a list of model ids")
        if model in chain:
            raise FallbackError(f"LLM_FALLBACK_MODELS[{model!r}] names {model!r} itself")
        table[model] = tuple(dict.fromkeys(chain))
    return table


def chain(
    model: str, fallbacks: Mapping[str, tuple[str, ...]], *, local_only: bool = False
) -> tuple[str, ...]:
    """The models a call of `model` may be answered by, in order: `model`, then its fallbacks
    — under `local_only` (LLM_DATA_RESIDENCY=local) only the local ones. `model` itself is
    always first: whether it may be called at all is the residency check's (a purpose whose
    model is not local is refused before any chain)."""
    following = fallbacks.get(model, ())
    if local_only:
        following = tuple(m for m in following if is_local(m))
    return (model, *following)


def fallback_models(fallbacks: Mapping[str, tuple[str, ...]]) -> set[str]:
    """Every model a fallback list names (each needs a price at start, like a purpose's)."""
    return {m for chain_ in fallbacks.values() for m in chain_}
