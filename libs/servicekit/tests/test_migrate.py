"""Migrations across replicas: two processes migrating one database at once, and the one-shot."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nats
import psycopg
import pytest
from sqlalchemy import create_engine, text

from quiz_servicekit.db import sync_url
from quiz_testkit.databases import postgres_available, postgres_database
from quiz_testkit.nats_server import nats_connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = Path(__file__).parent / "migrating" / "service.py"
GATE_LOCK_ID = 4_242_999  # the migration waits on it (migrating/migrations/versions/0001)
# Bounded waits for processes to reach a state; they fail the test, they are not timings.
WAIT_S = 120


def service_env(database_url: str, nats_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "NATS_URL": nats_url,
        "HTTP_PORT": "0",
        "LOG_LEVEL": "INFO",
        "OTEL_SDK_DISABLED": "true",
    }


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not postgres_available():
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    with postgres_database("quiz_kit_migrate") as url:
        yield url


async def wait_for(predicate: object, what: str, logs: list[Path]) -> None:
    for _ in range(WAIT_S * 10):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"{what} did not happen: " + " | ".join(p.read_text()[-1500:] for p in logs))


async def registered(nc: nats.NATS) -> int:
    """How many kit-migrating instances answer $SRV.PING."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$SRV.PING.kit-migrating", b"", reply=inbox)
    seen: set[str] = set()
    try:
        while True:
            msg = await sub.next_msg(timeout=0.3)
            if msg.data:
                seen.add(json.loads(msg.data)["id"])
    except nats.errors.TimeoutError:
        pass
    await sub.unsubscribe()
    return len(seen)


async def test_two_replicas_migrating_at_once_one_migrates_the_other_waits(
    pg_url: str, nats_url: str, tmp_path: Path
) -> None:
    gate = psycopg.connect(sync_url(pg_url).replace("postgresql+psycopg", "postgresql"))
    gate.autocommit = True
    gate.execute("SELECT pg_advisory_lock(%s)", (GATE_LOCK_ID,))
    logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(SERVICE)],
            env=service_env(pg_url, nats_url),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        for log in logs
    ]
    nc = await nats_connect(nats_url)
    try:

        def texts() -> list[str]:
            return [log.read_text() for log in logs]

        # One replica is inside the migration, held at the gate; the other waits for its lock.
        await wait_for(
            lambda: (
                sum("Running upgrade" in t for t in texts()) == 1
                and sum("waiting for it" in t for t in texts()) == 1
            ),
            "one migrating while the other waits",
            logs,
        )
        assert await registered(nc) == 0, "nobody serves before its schema is at head"
        gate.execute("SELECT pg_advisory_unlock(%s)", (GATE_LOCK_ID,))

        async def both_up() -> bool:
            return await registered(nc) == 2

        for _ in range(WAIT_S):
            if await both_up():
                break
            assert all(p.poll() is None for p in procs), texts()
        else:
            pytest.fail("both replicas did not start: " + " | ".join(texts()))
        assert sum("Running upgrade" in t for t in texts()) == 1, "migrated once"
    finally:
        await nc.drain()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        gate.close()
    engine = create_engine(sync_url(pg_url))
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version_kit_migrating"))
        assert version.scalar_one() == "0001"
        assert conn.execute(text("SELECT COUNT(*) FROM migrated_once")).scalar_one() == 0
    engine.dispose()


def test_migrate_is_a_one_shot_command(tmp_path: Path, nats_url: str) -> None:
    url = f"sqlite:///{tmp_path / 'one-shot.db'}"
    for _ in range(2):  # the second run finds the schema at head and does nothing
        done = subprocess.run(
            [sys.executable, str(SERVICE), "migrate"],
            env=service_env(url, nats_url),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert done.returncode == 0, done.stderr
        assert "kit-migrating: database at head" in done.stderr
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM migrated_once")).scalar_one() == 0
    engine.dispose()
