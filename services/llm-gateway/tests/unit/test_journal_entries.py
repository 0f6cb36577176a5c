"""Journal entries: a settle round-trips, issue 10's journal lines still read, keys name writes."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

from sqlalchemy.exc import IntegrityError, OperationalError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, Usage
from quiz_contracts.llm_journal import JournalEntry, JournalHold, JournalLedgerRow, JournalReply
from quiz_llm_gateway.rows import LEDGER_COLUMNS, Held, LedgerRow
from quiz_llm_gateway.settlement.journal import (
    decode,
    encode,
    entry_key,
    entry_msg_id,
    settle_entry,
    settle_of,
    transient,
)

ROW = LedgerRow(
    at=datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC),
    day=date(2026, 11, 29),
    call_id="c-1",
    attempt=2,
    purpose="review",
    person=None,
    billed_to="teacher-1",
    model="claude-sonnet-4-6",
    effort="low",
    outcome="ok",
    input_tokens=1000,
    output_tokens=20,
    cost_micros=3300,
    reserved_micros=9000,
    request_id="r-1",
)
HELD = Held("h-1", date(2026, 11, 29), 9000)


def test_a_settle_round_trips_through_a_journal_line() -> None:
    assert settle_of(decode(encode(settle_entry(HELD, ROW)))) == (HELD, ROW)
    assert settle_of(decode(encode(settle_entry(None, ROW)))) == (None, ROW)


def test_a_line_of_the_issue_10_journal_still_reads() -> None:
    """The format before the JetStream journal: the hold and the dataclass row, ISO dates."""
    r = ROW.model_dump()
    r["at"], r["day"] = ROW.at.isoformat(), ROW.day.isoformat()
    held = {"id": HELD.id, "day": HELD.day.isoformat(), "amount_micros": HELD.amount_micros}
    line = json.dumps({"held": held, "row": r}, separators=(",", ":")) + "\n"
    assert settle_of(decode(line)) == (HELD, ROW)


def test_keys_name_one_write_each() -> None:
    reply = CompleteReply(
        output={"findings": []},
        model="m",
        usage=Usage(input_tokens=1, output_tokens=1, cost_usd=Decimal("0.000018")),
        attempts=1,
        call_id="c-1",
    )
    kept = JournalEntry(
        reply=JournalReply(key="review:t:r-1", digest="d", call_id="c-1", reply=reply, until=1.0)
    )
    settle = settle_entry(HELD, ROW)
    assert entry_key(settle) == ("settle", "c-1", 2)
    assert entry_msg_id(settle) == "settle:c-1:2"
    assert entry_key(kept) == ("reply", "review:t:r-1#c-1", 0)
    assert decode(encode(kept)) == kept
    first = LedgerRow(**{**ROW.model_dump(), "attempt": 1})
    assert entry_key(settle) != entry_key(settle_entry(HELD, first))


def test_a_replay_stops_on_an_outage_and_skips_a_refused_entry() -> None:
    """What `transient` calls passing (the replay stops, tries again at the next sweep) and
    what not (that entry is kept, the others go on)."""
    locked = OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
    assert transient(locked)
    assert transient(TimeoutError())
    assert transient(ContractError(ErrorCode.timeout, "JetStream did not acknowledge"))
    assert transient(ContractError(ErrorCode.unavailable, "no stream stores it"))
    assert not transient(ValueError("not a settle entry"))
    assert not transient(IntegrityError("INSERT", {}, Exception("value too long")))


def test_the_ledger_row_is_the_contracts_and_its_wire_shape_unchanged() -> None:
    """Issue 32: the row's fields are written once (the contract's), the table has the same
    columns, and a settle's journal JSON (signed by the journal MAC) is the contract model's,
    byte for byte."""
    fields = list(JournalLedgerRow.model_fields)
    assert list(LedgerRow.model_fields) == fields and sorted(LEDGER_COLUMNS) == sorted(fields)
    contract = JournalLedgerRow(**{f: getattr(ROW, f) for f in fields})
    hold = JournalHold(id=HELD.id, day=HELD.day, amount_micros=HELD.amount_micros)
    assert encode(settle_entry(HELD, ROW)) == encode(JournalEntry(held=hold, row=contract))
