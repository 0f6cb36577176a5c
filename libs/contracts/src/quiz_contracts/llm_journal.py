"""llm-gateway's settle journal: what a paid call's bookkeeping left for later (issue 20, item 4).

When the gateway's database does not take a write that follows a paid provider answer — the
settle (hold released, real cost, ledger row) or the request id's stored reply —, the write is
kept as one `JournalEntry` instead: published on the JetStream stream `LLM_JOURNAL`
(`subjects.llm_journal_subject(database_id)`, one subject per gateway database) so that any
replica replays it, or, when JetStream cannot take it either, appended to the replica's local
journal file (one JSON line, the same model). Only llm-gateway publishes and reads these.

An entry carries the ledger row and hold of a settle, or a stored reply (model output: kept
like the `idempotency_keys` row it stands for); never the prompt.

Issue 29 item 2: an entry on the stream carries `mac`, an HMAC-SHA256 under a key only the
gateway holds (LLM_GATEWAY_JOURNAL_KEY), over its subject and its JSON without `mac`
(quiz_llm_gateway.domain.journal_mac); the gateway applies none that fails the check. Money and
tokens are never negative (a settle of −5,000,000 µ$ would take the day's spend below zero).
"""

from __future__ import annotations

from datetime import date, datetime

from pydantic import Field

from quiz_contracts.base import WireModel
from quiz_contracts.llm import CompleteReply


class JournalHold(WireModel):
    """The reservation a settle releases."""

    id: str
    day: date = Field(description="Its Europe/Zurich budget day.")
    amount_micros: int = Field(ge=0, description="The worst case held, micro-USD.")
    lease_id: str | None = Field(
        default=None,
        description=(
            "The replica's slice of the cap the hold was taken from (issue 24); null for a "
            "reservation row of its own."
        ),
    )


class JournalLedgerRow(WireModel):
    """One `llm_ledger` row (docs/llm-gateway.md, Attribution); money in micro-USD."""

    at: datetime
    day: date
    call_id: str
    attempt: int = Field(
        description=(
            "0 for a refusal, else the attempt's number: 1, then 2 after an unreadable reply "
            "or for a fallback model (issue 31), and so on."
        )
    )
    purpose: str
    person: str | None
    billed_to: str | None
    model: str
    effort: str
    outcome: str
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost_micros: int = Field(default=0, ge=0)
    reserved_micros: int = Field(default=0, ge=0)
    error_code: str | None = None
    provider_requests: int = Field(default=0, ge=0)
    latency_ms: int = Field(default=0, ge=0)
    request_id: str | None = None
    trace_id: str | None = None
    # Issue 31: of input_tokens, read from / written to the prompt cache. Left out of the
    # signed text while 0, so entries written before these fields still verify (journal_mac).
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)


class JournalReply(WireModel):
    """A paid call's reply, to be kept under its request id (`idempotency_keys`)."""

    key: str = Field(description="purpose:payer:request_id.")
    digest: str = Field(description="SHA-256 of the request (the key's conflict check).")
    call_id: str
    reply: CompleteReply
    until: float = Field(description="Unix seconds until which the reply is kept.")


class JournalEntry(WireModel):
    """A settle (`row`, with its `held` reservation if any) or a stored reply (`reply`)."""

    held: JournalHold | None = None
    row: JournalLedgerRow | None = None
    reply: JournalReply | None = None
    mac: str | None = Field(
        default=None,
        description=(
            "HMAC-SHA256 (hex) of the entry's subject and JSON without mac, under the gateway's "
            "journal key (issue 29). Set on the stream; an entry without a valid one is never "
            "applied."
        ),
    )


__all__ = ["JournalEntry", "JournalHold", "JournalLedgerRow", "JournalReply"]
