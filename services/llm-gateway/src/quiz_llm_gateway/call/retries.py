"""Provider requests of one call: bounded retries with backoff, within the deadline and circuit."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from quiz_llm_gateway.call.provider import Provider, ProviderError, ProviderReply
from quiz_llm_gateway.call.record import CallRecord
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.circuit import CircuitBreaker, CircuitState
from quiz_llm_gateway.metrics import GatewayMetrics

CIRCUIT_GAUGE = {CircuitState.closed: 0, CircuitState.half_open: 1, CircuitState.open: 2}


class ProviderFailure(Exception):
    """The provider could not answer within the retries and the deadline."""

    def __init__(self, message: str, requests: int, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.requests = requests
        self.retry_after_s = retry_after_s


class ProviderCalls:
    """The provider behind this replica's circuit breaker and in-flight bound."""

    def __init__(
        self,
        provider: Provider,
        settings: Settings,
        metrics: GatewayMetrics,
        circuit: CircuitBreaker,
        *,
        monotonic: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.metrics = metrics
        self.circuit = circuit
        self.monotonic = monotonic
        self.sleep = sleep
        self.in_flight = asyncio.Semaphore(settings.max_in_flight)

    async def call(
        self,
        call: CallRecord,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        deadline: float,
    ) -> tuple[ProviderReply, int]:
        """One answer and how many requests it took; retries 429/529/5xx/timeouts with backoff.

        Raises ProviderFailure when the deadline passes, the circuit opens, the error is final
        or the retries run out.
        """
        requests = 0
        while True:
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                raise ProviderFailure("the caller's deadline passed", requests)
            if not self.circuit.allow(self.monotonic()):
                raise ProviderFailure(
                    "the provider is failing (circuit open)",
                    requests,
                    self.circuit.retry_after(self.monotonic()),
                )
            requests += 1
            try:
                async with asyncio.timeout(remaining):
                    async with self.in_flight:
                        self.metrics.provider_in_flight.inc()
                        try:
                            reply = await self.provider.create(
                                model=call.model,
                                system=call.request.system,
                                messages=messages,
                                tools=tools,
                                max_tokens=call.request.max_output_tokens,
                                timeout_s=min(remaining, self.settings.provider_timeout_s),
                                purpose=call.request.purpose.value,
                                effort=call.request.effort.value,
                            )
                        finally:
                            self.metrics.provider_in_flight.dec()
            except TimeoutError:
                self.circuit.release_probe()
                self.metrics.child(self.metrics.provider_requests, call.model, "deadline").inc()
                raise ProviderFailure("the caller's deadline passed", requests) from None
            except ProviderError as e:
                self.metrics.child(self.metrics.provider_requests, call.model, e.kind).inc()
                if e.kind == "timeout" and remaining < self.settings.provider_timeout_s:
                    # Cut by the caller's deadline, not by a provider outage.
                    self.circuit.release_probe()
                    raise ProviderFailure("the caller's deadline passed", requests) from e
                if e.outage:
                    self.circuit.record_failure(self.monotonic())
                else:
                    self.circuit.record_success()
                self.update_circuit_gauge()
                if not e.retryable or requests > self.settings.provider_max_retries:
                    raise ProviderFailure(f"provider error {e}", requests) from e
                delay = self._backoff(requests, e.retry_after_s)
                if self.monotonic() + delay >= deadline:
                    raise ProviderFailure(
                        f"provider error {e}; no time left to retry", requests, e.retry_after_s
                    ) from e
                await self.sleep(delay)
                continue
            self.metrics.child(self.metrics.provider_requests, call.model, "ok").inc()
            self.circuit.record_success()
            self.update_circuit_gauge()
            return reply, requests

    def _backoff(self, retry: int, retry_after_s: float | None) -> float:
        """The provider's retry-after when given, else capped exponential backoff, jittered."""
        if retry_after_s is not None:
            # Already finite and within [0, RETRY_AFTER_MAX_S] (parse_retry_after); the wait
            # itself is bounded further, and by the deadline at the caller.
            return min(retry_after_s, self.settings.backoff_max_s * 4)
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2 ** (retry - 1))
        return ceiling * (0.5 + random.random() / 2)

    def update_circuit_gauge(self) -> None:
        self.metrics.circuit_state.set(CIRCUIT_GAUGE[self.circuit.current(self.monotonic())])
