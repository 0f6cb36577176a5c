"""Provisioning: the platform's streams, durable consumers and KV buckets, created by operations.

    python -m quiz_servicekit.provision [--replicas N] [--check]   # as the `ops` user

Issue 29 item 1: no service may reshape the bus (nats-server checks a JetStream API subject,
never the config it carries, so a service allowed `$JS.API.STREAM.UPDATE.<its stream>` could
add `sources`, `subjects` or a `republish` to it). What JetStream holds is declared once, in
`quiz_contracts.topology`, and this one step, run with the account-wide `ops` credentials,
creates it and brings it to the declaration:

- every stream created, or updated to its declared config (replicas from `--replicas` /
  NATS_STREAM_REPLICAS, scaled up never down: `quiz_servicekit.jetstream.ensure_stream`);
  an `external` stream (QUESTIONS, the question store's) only created when missing;
- every KV bucket created, its TTL and replicas brought to the declaration (`lease_bucket`);
- every durable pull consumer created when missing (an existing one is left as its service
  last set it: the service updates its own consumer to its settings at start).

`make provision` runs it (and `make run` first of all), the compose stack's one-shot service
`provision`, the Kubernetes Job `bus-provision` before the Deployments; the test kit's
NatsServer and NatsCluster at start. Idempotent: run it again after any upgrade. `--check`
changes nothing and exits 1 naming what is missing.

Services check at start that what they use exists (`missing`) and stop with
`BusNotProvisioned` naming it and this command when it does not.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Iterable

import nats
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from quiz_contracts import topology
from quiz_contracts.topology import BucketDecl, ConsumerDecl, StreamDecl
from quiz_servicekit.jetstream import (
    PROVISION_HINT,
    BusNotProvisioned,
    consumer_config,
    ensure_stream,
    missing,
    require,
)
from quiz_servicekit.lease import lease_bucket
from quiz_servicekit.natsio import inbox_prefix_for, nats_servers

log = logging.getLogger(__name__)


async def provision(
    js: JetStreamContext,
    *,
    replicas: int = 1,
    streams: Iterable[StreamDecl] = topology.STREAMS,
    consumers: Iterable[ConsumerDecl] = topology.CONSUMERS,
    buckets: Iterable[BucketDecl] = topology.BUCKETS,
) -> list[str]:
    """Create or update everything declared (module docstring); one line per thing done.

    Needs the `ops` credentials (no service user may). Raises JetStreamConfigError for a
    stream the server cannot bring to its declaration (retention changed…)."""
    done: list[str] = []
    for decl in streams:
        if decl.external:
            try:
                await js.stream_info(decl.name)
                done.append(f"stream {decl.name}: exists (owned elsewhere, left as it is)")
                continue
            except NotFoundError:
                pass
        info = await ensure_stream(js, decl, replicas=replicas)
        done.append(f"stream {decl.name}: {info.config.num_replicas or 1} replica(s)")
    for bucket in buckets:
        await lease_bucket(js, bucket.name, ttl_s=bucket.ttl_s, replicas=replicas)
        done.append(f"bucket {bucket.name}: ttl {bucket.ttl_s:g} s")
    for c in consumers:
        try:
            await js.consumer_info(c.stream, c.name)
            done.append(f"consumer {c.stream}/{c.name}: exists")
        except NotFoundError:
            await js.add_consumer(c.stream, consumer_config(c))
            done.append(f"consumer {c.stream}/{c.name}: created")
    return done


def _auth_url(url: str) -> dict[str, str]:
    """NATS_USER/NATS_PASSWORD (compose, Kubernetes) unless the URL carries credentials."""
    user, password = os.environ.get("NATS_USER"), os.environ.get("NATS_PASSWORD")
    if user and password and "@" not in url:
        return {"user": user, "password": password}
    return {}


async def _cli(args: argparse.Namespace) -> int:
    auth = _auth_url(args.nats_url)
    # A one-shot job started beside nats-server (compose, a Job, `make run`): wait for it.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.wait_s
    while True:
        try:
            nc = await nats.connect(
                servers=nats_servers(args.nats_url),
                inbox_prefix=inbox_prefix_for(args.nats_url, auth.get("user")),
                connect_timeout=2,
                allow_reconnect=False,
                **auth,
            )
            break
        except Exception as e:
            if loop.time() > deadline:
                print(f"provision: NATS does not answer ({e})", file=sys.stderr)
                return 2
            await asyncio.sleep(0.5)
    try:
        js = nc.jetstream()
        if args.check:
            absent = await missing(
                js,
                streams=[d.name for d in topology.STREAMS],
                consumers=[(c.stream, c.name) for c in topology.CONSUMERS],
                buckets=[b.name for b in topology.BUCKETS],
            )
            for name in absent:
                print(f"missing: {name}", file=sys.stderr)
            return 1 if absent else 0
        for line in await provision(js, replicas=args.replicas):
            print(line)
        return 0
    finally:
        await nc.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m quiz_servicekit.provision [--replicas N] [--check]` against $NATS_URL."""
    parser = argparse.ArgumentParser(prog="python -m quiz_servicekit.provision")
    parser.add_argument("--nats-url", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument(
        "--replicas",
        type=int,
        default=int(os.environ.get("NATS_STREAM_REPLICAS", "1")),
        help="replicas of every stream and bucket (NATS_STREAM_REPLICAS; 3 on the cluster)",
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if missing")
    parser.add_argument(
        "--wait-s", type=float, default=60.0, help="how long to wait for NATS to answer"
    )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(_cli(parser.parse_args(argv)))


__all__ = [
    "PROVISION_HINT",
    "BusNotProvisioned",
    "consumer_config",
    "main",
    "missing",
    "provision",
    "require",
]


if __name__ == "__main__":
    sys.exit(main())
