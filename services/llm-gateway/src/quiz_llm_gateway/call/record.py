"""The record of one complete() call: its model and price, running totals, its ledger rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from quiz_contracts.llm import CompleteRequest, Usage
from quiz_llm_gateway.domain.days import budget_day
from quiz_llm_gateway.domain.pricing import ModelPrice, usd
from quiz_llm_gateway.domain.prompt_cache import cached_cost_micros
from quiz_llm_gateway.rows import Held, LedgerRow


@dataclass(slots=True)
class CallRecord:
    """One call from admission to reply: what it asked, what it has cost so far."""

    call_id: str
    request: CompleteRequest
    model: str
    price: ModelPrice
    trace_id: str | None
    started: float  # monotonic seconds
    input_tokens: int = 0
    output_tokens: int = 0
    # Of input_tokens, read from / written to the prompt cache (issue 31).
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_micros: int = 0
    attempts: int = 0  # admitted attempts (1, or 2 after an unreadable reply)
    requests: int = 0  # provider HTTP requests, retries included
    # The person's calls left in the rate window after this call, as its first admission's
    # rate check counted them (issue 31 item 6); None without a per-person limit.
    calls_left: int | None = None

    def add(
        self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> int:
        """Count one provider answer; returns its cost in micro-USD.

        `input_tokens` is every input token, of which `cache_read` were read from the prompt
        cache (0.1 × the input price) and `cache_write` written to it (1.25 ×).
        """
        if cache_read or cache_write:
            cost = cached_cost_micros(
                self.price, input_tokens, output_tokens, cache_read, cache_write
            )
        else:
            cost = self.price.cost_micros(input_tokens, output_tokens)
        self.cache_read_tokens += cache_read
        self.cache_write_tokens += cache_write
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_micros += cost
        return cost

    def usage(self) -> Usage:
        """The call's tokens and cost so far, as the reply reports them."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=usd(self.cost_micros),
            cache_read_input_tokens=self.cache_read_tokens,
            cache_creation_input_tokens=self.cache_write_tokens,
        )

    def ledger_row(
        self,
        *,
        attempt: int,
        outcome: str,
        now: float,
        held: Held | None = None,
        error_code: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_micros: int = 0,
        requests: int = 0,
        latency_s: float = 0.0,
        cache_read_input_tokens: int = 0,
        cache_creation_input_tokens: int = 0,
    ) -> LedgerRow:
        """A ledger row of this call; prompt text is never part of it (data minimisation)."""
        req = self.request
        at = datetime.fromtimestamp(now, UTC)
        return LedgerRow(
            at=at,
            day=held.day if held is not None else budget_day(at),
            call_id=self.call_id,
            attempt=attempt,
            purpose=req.purpose.value,
            person=req.user,
            billed_to=req.payer,
            model=self.model,
            effort=req.effort.value,
            outcome=outcome,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_micros=cost_micros,
            reserved_micros=held.amount_micros if held is not None else 0,
            error_code=error_code,
            provider_requests=requests,
            latency_ms=int(latency_s * 1000),
            request_id=req.request_id,
            trace_id=self.trace_id,
            cache_read_input_tokens=cache_read_input_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
        )
