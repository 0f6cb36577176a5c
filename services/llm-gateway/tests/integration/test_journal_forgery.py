"""Only the gateway's own journal entries are replayed (issue 29 item 2), from the attacker's
side: the real gateway process on the session's locked nats-server; the attacker holds a bus
credential — poll's, or even the gateway's own bus password — but not the journal key.

poll may not publish on the journal at all (nats-server refuses). With the `llm-gateway` bus
credential, a forged settle (unsigned), a settle of −5,000,000 µ$ and a planted stored reply
(under a MAC made with another key) reach the stream: the gateway applies none of them, counts
each in `quiz_llm_gateway_journal_rejected_total{reason}` and removes them; the day's spend
stays 0, and a call whose request id the planted reply claims is answered by the model.
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.request
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from quiz_contracts import subjects
from quiz_contracts.llm import CompleteReply, Usage
from quiz_contracts.llm_journal import JournalEntry, JournalReply
from quiz_llm_gateway.domain.days import budget_day
from quiz_llm_gateway.domain.journal_mac import sign
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.settlement.requests import request_digest
from quiz_servicekit.db import Database
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.scripts import eventually

from .test_gateway import request as complete_request
from .test_journal_stream import gateway

pytestmark = pytest.mark.integration
REJECTED = "quiz_llm_gateway_journal_rejected_total"


def rejected(proc: ServiceProcess) -> dict[str, float]:
    with urllib.request.urlopen(f"{proc.url}/metrics", timeout=5) as r:  # noqa: S310
        text = r.read().decode()
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(rf'^{REJECTED}{{reason="(\w+)"}} (\S+)$', text, re.MULTILINE)
    }


def forged_settle(call_id: str, cost_micros: int) -> bytes:
    now = datetime.now(UTC)
    row = {
        "at": now.isoformat(),
        "day": budget_day(now).isoformat(),
        "call_id": call_id,
        "attempt": 1,
        "purpose": "review",
        "person": None,
        "billed_to": None,
        "model": "claude-sonnet-4-6",
        "effort": "low",
        "outcome": "ok",
        "input_tokens": 10,
        "output_tokens": 10,
        "cost_micros": cost_micros,
    }
    # As an attacker writes it: raw JSON, whatever the contract says.
    return json.dumps({"row": row}).encode()


async def test_entries_the_gateway_did_not_write_are_never_applied(
    migrated_url: str, nats_server: NatsServer, anthropic_stub: AnthropicStub, tmp_path: Path
) -> None:
    repo = Repository(Database(migrated_url, threads=2))
    subject = subjects.llm_journal_subject(await repo.database_id())
    call = complete_request(request_id="planted-1", user="teacher-1")
    planted = JournalEntry(
        reply=JournalReply(
            key=f"{call.purpose.value}:{call.payer}:{call.request_id}",
            digest=request_digest(call),
            call_id="forged-reply",
            reply=CompleteReply(
                output={"findings": [{"message": "planted"}]},
                model="claude-sonnet-4-6",
                usage=Usage(input_tokens=1, output_tokens=1, cost_usd=Decimal("0")),
                attempts=1,
                call_id="forged-reply",
            ),
            until=datetime.now(UTC).timestamp() + 3600,
        )
    )
    proc = gateway(nats_server.url, migrated_url, anthropic_stub, tmp_path / "gw")
    try:
        proc.start()
        # poll may not write on the journal at all: the bus refuses the publish.
        poll = await nats_connect(nats_server.url_for("poll"))
        with pytest.raises(Exception):  # noqa: B017 (no ack: refused before JetStream)
            await poll.jetstream(timeout=1).publish(subject, forged_settle("poll-1", 10))
        await poll.close()
        # The gateway's own bus credential, stolen: the publishes are stored, never applied.
        thief = await nats_connect(nats_server.url_for("llm-gateway"))
        js = thief.jetstream()
        await js.publish(subject, forged_settle("forged-1", 10))
        await js.publish(subject, forged_settle("forged-2", -5_000_000))
        other_key = secrets.token_hex(32).encode()
        await js.publish(subject, sign(other_key, subject, planted).model_dump_json().encode())

        async def gone() -> bool:
            info = await js.stream_info(subjects.LLM_JOURNAL_STREAM, subjects_filter=subject)
            return not info.state.subjects

        await eventually(gone, timeout_s=20)
        await eventually(
            lambda: rejected(proc) == {"unsigned": 1.0, "bad_mac": 1.0, "invalid": 1.0},
            timeout_s=10,
        )
        for call_id in ("forged-1", "forged-2", "forged-reply"):
            assert await repo.ledger_rows(call_id=call_id) == []
        totals = await repo.day_totals(budget_day(datetime.now(UTC)))
        assert totals is None or totals.spent_micros == 0
        # The planted reply is not served: the model answers the request id.
        anthropic_stub.script(StubReply.tool({"findings": []}))
        ops = await nats_connect(nats_server.url)
        reply = await request(ops, subjects.LLM_COMPLETE, call, CompleteReply, timeout=30)
        assert reply.output == {"findings": []} and reply.call_id != "forged-reply"
        assert len(anthropic_stub.requests) == 1
        assert "refused (unsigned" in proc.log_tail(20000)
        await ops.close()
        await thief.close()
    finally:
        proc.stop()
