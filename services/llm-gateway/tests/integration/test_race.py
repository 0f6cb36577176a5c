"""Two gateway processes on one database, 1,000 concurrent calls: the cap is never overspent."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from sqlalchemy import create_engine, text

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_llm_gateway.domain.pricing import estimate_input_tokens
from quiz_llm_gateway.rows.tables import MIGRATIONS
from quiz_servicekit.db import sync_url
from quiz_servicekit.migrate import upgrade
from quiz_servicekit.natsio import request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.databases import postgres_available, postgres_database
from quiz_testkit.nats_server import nats_connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CALLS = 1000
CAP_USD = "1"
CAP_MICROS = 1_000_000
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}},
    "required": ["verdict"],
}


def worst_case_usage(body: dict[str, Any]) -> StubReply:
    """Bill exactly the gateway's worst case, so admitted calls fill the cap to the last cent."""
    tokens = estimate_input_tokens(body.get("system"), body["messages"], body.get("tools"))
    return StubReply.tool(
        {"verdict": "ok"}, usage={"input_tokens": tokens, "output_tokens": body["max_tokens"]}
    )


@contextmanager
def race_database(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'race.db'}"
        return
    if not postgres_available():
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database("quiz_llm_race") as url:
        yield url


async def _instances(nc: Any, wait_s: float = 0.3) -> set[str]:
    """Ids of the llm-gateway instances that answer $SRV.PING now."""
    seen: set[str] = set()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$SRV.PING.llm-gateway", b"", reply=inbox)
    try:
        while True:
            msg = await sub.next_msg(timeout=wait_s)
            if msg.data:  # an empty message is the server's "no responders" status
                seen.add(json.loads(msg.data)["id"])
    except nats.errors.TimeoutError:
        pass
    await sub.unsubscribe()
    return seen


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
async def test_two_replicas_never_overspend(backend: str, nats_url: str, tmp_path: Path) -> None:
    stub = AnthropicStub(default=StubReply.callable(worst_case_usage), record_requests=False)
    stub.start()
    procs: list[subprocess.Popen[bytes]] = []
    with race_database(backend, tmp_path) as url:
        await asyncio.to_thread(upgrade, url, MIGRATIONS)
        env = {
            **os.environ,
            "NATS_URL": nats_url,
            "DATABASE_URL": url,
            "ANTHROPIC_API_KEY": "race-key",
            "ANTHROPIC_BASE_URL": stub.base_url,
            "LLM_DAILY_CAP_USD": CAP_USD,
            "HTTP_PORT": "0",
            "LOG_LEVEL": "WARNING",
            "OTEL_SDK_DISABLED": "true",
            "LLM_GATEWAY_SETTLE_JOURNAL_DIR": str(tmp_path / "journal"),
        }
        try:
            for i in range(2):
                log = open(tmp_path / f"gateway-{i}.log", "wb")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "quiz_llm_gateway.main"],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            nc = await nats_connect(nats_url)
            for _ in range(300):
                if len(await _instances(nc, 0.2)) == 2:
                    break
                assert all(p.poll() is None for p in procs), "a gateway process died"
            else:
                logs = [(tmp_path / f"gateway-{i}.log").read_text()[-2000:] for i in range(2)]
                pytest.fail(f"two gateway instances did not register: {logs}")

            rng = random.Random(7)

            async def one(i: int) -> str:
                req = CompleteRequest(
                    purpose="poll",
                    user=None,
                    messages=[{"role": "user", "content": f"Judge idea n{i}."}],
                    output_schema={"name": "judge", "json_schema": SCHEMA},
                    # Worst cases from $0.0016 to $0.0111 (Haiku): 1,000 of them cost ~6x the cap.
                    max_output_tokens=rng.randint(100, 2000),
                    deadline_s=120,
                )
                try:
                    await request(nc, subjects.LLM_COMPLETE, req, CompleteReply, timeout=120)
                    return "ok"
                except ContractError as e:
                    return e.code.value

            outcomes = Counter(await asyncio.gather(*[one(i) for i in range(CALLS)]))
            await nc.drain()
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=20)
            stub.stop()

        assert set(outcomes) <= {"ok", ErrorCode.llm_budget_exhausted.value}, outcomes
        assert outcomes["ok"] > 0 and outcomes[ErrorCode.llm_budget_exhausted.value] > 0
        engine = create_engine(sync_url(url))
        with engine.connect() as conn:
            cap, reserved, spent = conn.execute(
                text("SELECT cap_micros, reserved_micros, spent_micros FROM budget_days")
            ).one()
            ledger = conn.execute(
                text("SELECT COALESCE(SUM(cost_micros), 0), COUNT(*) FROM llm_ledger")
            ).one()
            open_holds = conn.execute(text("SELECT COUNT(*) FROM reservations")).scalar_one()
            # Both replicas gave their slices of the cap back at shutdown (issue 24).
            leases = conn.execute(text("SELECT COUNT(*) FROM cap_leases")).scalar_one()
            ok_rows = conn.execute(
                text("SELECT COUNT(*) FROM llm_ledger WHERE outcome = 'ok'")
            ).scalar_one()
        engine.dispose()
        share = f"{spent / cap:.2%}"
        print(f"\nrace ({backend}): {dict(outcomes)}, spent {spent} of {cap} micro-USD ({share})")
        assert cap == CAP_MICROS
        assert spent <= cap, "overspent"
        assert spent >= 0.95 * cap, "reservations lost or leaked"
        assert reserved == 0 and open_holds == 0 and leases == 0
        assert ledger[0] == spent, "the ledger and the counter agree"
        assert ledger[1] == CALLS and ok_rows == outcomes["ok"]
