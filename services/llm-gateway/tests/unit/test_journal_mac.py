"""Only the gateway's own journal entries verify; money is never negative (issue 29 item 2)."""

from __future__ import annotations

import secrets
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from pydantic import ValidationError

from quiz_contracts.llm import CompleteReply, Usage
from quiz_contracts.llm_journal import JournalEntry, JournalLedgerRow, JournalReply
from quiz_llm_gateway.domain.journal_mac import check_key, mac_of, sign, verify
from quiz_llm_gateway.domain.money import check_amounts, check_usd
from quiz_llm_gateway.domain.pricing import ModelPrice, PricingError, parse_prices
from quiz_llm_gateway.rows import Held, LedgerRow
from quiz_llm_gateway.settlement.journal import settle_entry

KEY = secrets.token_hex(32).encode()
SUBJECT = "llm.v1.journal.db-1"
ROW = LedgerRow(
    at=datetime(2026, 12, 6, 12, tzinfo=UTC),
    day=date(2026, 12, 6),
    call_id="c-1",
    attempt=1,
    purpose="review",
    person=None,
    billed_to=None,
    model="claude-sonnet-4-6",
    effort="low",
    outcome="ok",
    input_tokens=100,
    output_tokens=20,
    cost_micros=600,
    reserved_micros=5000,
)


def test_a_signed_entry_verifies_and_survives_the_wire() -> None:
    entry = sign(KEY, SUBJECT, settle_entry(Held("h-1", ROW.day, 5000), ROW))
    assert entry.mac is not None and len(entry.mac) == 64
    again = JournalEntry.model_validate_json(entry.model_dump_json())
    assert verify(KEY, SUBJECT, again)


def test_what_the_gateway_did_not_sign_does_not_verify() -> None:
    entry = settle_entry(None, ROW)
    assert not verify(KEY, SUBJECT, entry)  # no MAC
    signed = sign(KEY, SUBJECT, entry)
    assert not verify(secrets.token_hex(32).encode(), SUBJECT, signed)  # another key
    assert not verify(KEY, "llm.v1.journal.db-2", signed)  # another database's subject
    # Any change to a signed entry breaks it: a cost, a payer, a stored reply.
    assert signed.row is not None
    cheaper = signed.model_copy(update={"row": signed.row.model_copy(update={"cost_micros": 1})})
    assert not verify(KEY, SUBJECT, cheaper)
    forged = signed.model_copy(update={"mac": mac_of(b"x" * 32, SUBJECT, entry)})
    assert not verify(KEY, SUBJECT, forged)


def test_a_stored_reply_is_signed_like_a_settle() -> None:
    reply = CompleteReply(
        output={"findings": []},
        model="m",
        usage=Usage(input_tokens=1, output_tokens=1, cost_usd=Decimal("0.000018")),
        attempts=1,
        call_id="c-1",
    )
    entry = JournalEntry(
        reply=JournalReply(key="review:t:r-1", digest="d", call_id="c-1", reply=reply, until=1.0)
    )
    signed = sign(KEY, SUBJECT, entry)
    assert verify(KEY, SUBJECT, JournalEntry.model_validate_json(signed.model_dump_json()))
    assert signed.reply is not None
    planted = signed.reply.reply.model_copy(update={"output": {"findings": ["planted"]}})
    tampered = signed.model_copy(
        update={"reply": signed.reply.model_copy(update={"reply": planted})}
    )
    assert not verify(KEY, SUBJECT, tampered)


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        check_key(b"short")
    assert check_key(KEY) == KEY


@pytest.mark.parametrize("field", ["cost_micros", "input_tokens", "output_tokens"])
def test_a_negative_amount_is_refused_on_the_wire(field: str) -> None:
    row = {**ROW.model_dump(), field: -5_000_000}
    with pytest.raises(ValidationError):
        JournalLedgerRow.model_validate(row)


def test_a_negative_cost_is_refused_by_the_ledger_row_and_the_hold() -> None:
    with pytest.raises(ValueError, match="cost_micros"):
        LedgerRow(**{**ROW.model_dump(), "cost_micros": -5_000_000})
    with pytest.raises(ValueError, match="amount_micros"):
        Held("h", ROW.day, -1)
    with pytest.raises(ValueError, match="integer"):
        check_amounts("x", cost_micros=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["-1", "NaN", "Infinity", "-Infinity", "sNaN"])
def test_a_negative_or_non_finite_usd_amount_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        check_usd("cost", Decimal(value))
    with pytest.raises(PricingError):
        ModelPrice(Decimal(value), Decimal("1"))
    with pytest.raises(PricingError):
        parse_prices({"m": {"input": value, "output": "1"}})
    with pytest.raises(ValidationError):
        Usage(input_tokens=1, output_tokens=1, cost_usd=value)  # type: ignore[arg-type]
    assert check_usd("cost", Decimal("0")) == 0
