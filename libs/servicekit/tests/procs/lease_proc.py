"""A lease contender for the takeover test: acquire, hold (renewing), report on stdout.

Usage: lease_proc.py NATS_URL BUCKET KEY TTL_S NAME

Lines: WAITING, ACQUIRED <revision>, HELD <revision> (each renewal seen), LOST.
"""

from __future__ import annotations

import asyncio
import sys

from quiz_servicekit.lease import KvLease, lease_bucket
from quiz_testkit.nats_server import nats_connect


def say(line: str) -> None:
    print(line, flush=True)


async def main() -> None:
    url, bucket, key, ttl, name = sys.argv[1:6]
    nc = await nats_connect(url)
    kv = await lease_bucket(nc.jetstream(), bucket, ttl_s=float(ttl))
    lease = KvLease(kv, key, holder=name, ttl_s=float(ttl))
    say("WAITING")
    await lease.acquire(poll_s=0.2)
    say(f"ACQUIRED {lease.token}")
    seen = lease.token
    while not lease.lost.is_set():
        await asyncio.sleep(0.1)
        if lease.token is not None and lease.token != seen:
            seen = lease.token
            say(f"HELD {seen}")
    say("LOST")
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
