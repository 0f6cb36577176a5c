"""The providers of one replica, picked per model (issue 31): Anthropic for `claude-*` (and any
id without a prefix), the self-hosted OpenAI-compatible server for `openai-compat/*`.

`Providers` is itself a `Provider` (the protocol of `call/provider.py`): `create` hands the
request to the model's provider, so retries, backoff, circuit and deadlines (`call/retries.py`)
wrap either alike. Under `LLM_DATA_RESIDENCY=local` the Anthropic client is never built, so no
code path can call it, whatever PURPOSE_MODELS says; the gateway refuses such a purpose first
(`domain.providers.residency_refused`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from quiz_llm_gateway.call.provider import Provider, ProviderError, ProviderReply
from quiz_llm_gateway.domain.providers import ProviderKind, provider_kind


class ClosableProvider(Provider, Protocol):
    """A provider client the registry owns: the Provider protocol's `create`, and `close`."""

    async def close(self) -> None: ...


class Providers:
    """Kind → client; `serves(model)` says whether the model's provider is configured here."""

    def __init__(self, clients: Mapping[ProviderKind, ClosableProvider]) -> None:
        self.clients = dict(clients)

    def serves(self, model: str) -> bool:
        """Whether `model`'s provider has a client (its key or base URL is configured)."""
        return provider_kind(model) in self.clients

    def __bool__(self) -> bool:
        return bool(self.clients)

    async def create(
        self,
        *,
        model: str,
        system: str | None,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        timeout_s: float,
        purpose: str,
        effort: str | None = None,
    ) -> ProviderReply:
        """The request, sent by `model`'s provider. A model whose provider is not configured
        never gets here (the gateway answers llm_not_configured first); should one, it is a
        final ProviderError, never a request to another provider."""
        client = self.clients.get(provider_kind(model))
        if client is None:
            raise ProviderError(f"not_configured: no provider for {model!r}")
        return await client.create(
            model=model,
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            purpose=purpose,
            effort=effort,
        )

    async def close(self) -> None:
        """Close every client's connection pool."""
        for client in self.clients.values():
            await client.close()
