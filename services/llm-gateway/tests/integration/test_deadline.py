"""A call whose caller gave up is never made (issue 20, item 3): a gateway paused past the
caller's deadline makes no provider request once resumed.

The real gateway process on the session's nats-server, the caller's real `LlmClient` (which
stamps the call's absolute deadline), the stub counting the provider requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_llm_gateway.rows import Repository
from quiz_servicekit.db import Database
from quiz_servicekit.llm import LlmClient
from quiz_testkit.anthropic_stub import AnthropicStub
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.processes import llm_gateway_process

from .test_gateway import request

pytestmark = pytest.mark.integration


async def test_a_gateway_paused_past_the_deadline_makes_no_provider_call(
    nats_url: str, anthropic_stub: AnthropicStub, tmp_path: Path
) -> None:
    gateway = llm_gateway_process(nats_url, anthropic_stub.base_url, tmp_path / "gateway")
    await asyncio.to_thread(gateway.start)
    nc = await nats_connect(nats_url)
    try:
        client = LlmClient(nc, deadline_margin_s=6.0)
        os.killpg(gateway.pid, signal.SIGSTOP)
        # The request waits in the paused gateway's socket past its 1 s deadline.
        call = asyncio.create_task(client.complete(request(deadline_s=1.0)))
        await asyncio.sleep(2.5)
        os.killpg(gateway.pid, signal.SIGCONT)
        with pytest.raises(ContractError) as info:
            await call
        assert info.value.code is ErrorCode.llm_failed
        assert "deadline" in info.value.message
        assert anthropic_stub.requests == [], "a call nobody waits for was made"
        repo = Repository(Database(f"sqlite:///{tmp_path / 'gateway' / 'gateway.db'}"))
        try:
            [row] = await repo.ledger_rows()
            assert row["outcome"] == "refused" and row["attempt"] == 0
            totals = await repo.day_totals(row["day"])
            assert totals is None or (totals.reserved_micros, totals.spent_micros) == (0, 0)
        finally:
            repo.db.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(gateway.pid, signal.SIGCONT)
        await asyncio.to_thread(gateway.stop)
        await nc.drain()
