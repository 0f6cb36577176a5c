"""A consumer process for the kill tests: the JetStream kit with an idempotent SQLite handler.

Usage: consumer_proc.py NATS_URL STREAM SUBJECT CONSUMER DB_PATH [MODE]
(MODE: pause-before-commit or pause-after-commit)

The handler records each job once, keyed by its business id (`job_id`), in the `done` table. In
a pause mode it stops forever at that point of the first job it sees, so the test can SIGKILL it
there. Lines on stdout tell the test where it is: READY, START <job> <delivery>, PAUSED <job>,
DONE <job>, SKIP <job> (already recorded by an earlier delivery).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys

from quiz_contracts.base import WireModel
from quiz_contracts.topology import StreamDecl
from quiz_servicekit.jetstream import ConsumerSpec, Delivery, JetStreamKit
from quiz_servicekit.metrics import ServiceMetrics
from quiz_testkit.nats_server import nats_connect


class Job(WireModel):
    job_id: str


def say(line: str) -> None:
    print(line, flush=True)


async def main() -> None:
    url, stream, subject, consumer, db_path = sys.argv[1:6]
    pause = sys.argv[6] if len(sys.argv) > 6 else ""
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS done (job_id TEXT PRIMARY KEY, pid INT, delivery INT)")

    async def handle(job: Job, delivery: Delivery) -> None:
        say(f"START {job.job_id} {delivery.num_delivered}")
        if db.execute("SELECT 1 FROM done WHERE job_id = ?", (job.job_id,)).fetchone():
            say(f"SKIP {job.job_id}")
            return
        if pause == "pause-before-commit":
            say(f"PAUSED {job.job_id}")
            await asyncio.Event().wait()
        db.execute(
            "INSERT INTO done (job_id, pid, delivery) VALUES (?, ?, ?)",
            (job.job_id, os.getpid(), delivery.num_delivered),
        )
        if pause == "pause-after-commit":
            say(f"PAUSED {job.job_id}")
            await asyncio.Event().wait()
        say(f"DONE {job.job_id}")

    nc = await nats_connect(url)
    kit = JetStreamKit(f"proc-{consumer}", ServiceMetrics(f"proc-{consumer}"))
    kit.add_stream(StreamDecl(stream, (subject,)))
    kit.add_consumer(
        ConsumerSpec(
            consumer,
            stream,
            Job,
            handle,
            ack_wait_s=2.0,
            max_deliver=5,
            nak_delays_s=(0.1,),
            fetch_timeout_s=1.0,
        )
    )
    await kit.start(nc)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    say("READY")
    await stop.wait()
    await kit.stop(grace_s=5)
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
