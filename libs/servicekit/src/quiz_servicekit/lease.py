"""Leases on JetStream KV: one holder at a time across replicas, renewed while held, expiring.

A lease is one key in a KV bucket whose entries all expire `ttl_s` after their last write (the
bucket's max age). Acquire is `create` (succeeds only when the key is absent, deleted or
expired); renew is `update` with the revision we wrote last (compare-and-swap); release is a
delete with that revision. A holder that dies stops renewing, its entry ages out, and the next
`create` by another replica succeeds: takeover takes at most `ttl_s` plus the contender's poll.

Guarantees and assumptions (docs/jetstream.md has the long form):
- Mutual exclusion comes from the server: create and update-with-revision are atomic on the
  stream leader (replicated with RAFT when the bucket has replicas), so two holders never both
  succeed. Expiry is decided by the SERVER's clock alone; no two machines compare wall clocks.
- A holder stops trusting its lease `ttl_s × (1 − margin)` after it SENT the last successful
  renewal, by its own monotonic clock (`quiz_servicekit.lease_time.holder_deadline`). The
  server expires the entry no earlier than `ttl_s` after it WROTE it, which is after that
  send; so the holder lets go first as long as the two clocks' RATES differ by less than
  `margin` (10 % by default: real clocks differ by ppm).
- Network partition: a holder cut off from NATS cannot renew; it reports `held == False` and
  sets `lost` at its local deadline, before the server lets anyone else in. Work that cannot be
  interrupted at once (a model call in flight) may overlap the next holder's by its own
  duration: handlers stay idempotent, and a store that supports a conditional write can check
  `token` (the revision, which only grows) as a fencing token.
- A process paused longer than the margin (GC, SIGSTOP, a blocked event loop) can wake up
  believing it holds a lease that expired: `held` is checked against the clock, so check it
  (or use `run_exclusive`, which cancels the work when the lease is lost) before side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.js import JetStreamContext, api
from nats.js.errors import APIError, BucketNotFoundError, KeyNotFoundError
from nats.js.errors import KeyWrongLastSequenceError as WrongRevision
from nats.js.kv import KeyValue
from pydantic import BaseModel, ValidationError

from quiz_servicekit.jetstream import JetStreamConfigError, require, wait_replicated
from quiz_servicekit.lease_time import check_timing, holder_deadline

log = logging.getLogger(__name__)
T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
# JetStream's "wrong last sequence" errors (a delete with a stale revision).
_WRONG_LAST_SEQUENCE = (10071, 10164)


class LeaseLost(Exception):
    """The lease is no longer ours: taken over, expired, or never acquired."""


class LeaseRecord(BaseModel):
    """The value of a lease key: who holds it, for operators (`nats kv get <bucket> <key>`)."""

    holder: str
    acquired_at: str
    renewed_at: str
    ttl_s: float


def default_holder_id(service: str) -> str:
    """`<service>@<host>:<pid>:<random>`: unique per process, readable in the KV entry."""
    return f"{service}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


async def lease_bucket(
    js: JetStreamContext,
    bucket: str,
    *,
    ttl_s: float,
    replicas: int = 1,
    description: str = "leases (quiz_servicekit.lease)",
) -> KeyValue:
    """The KV bucket of one kind of lease, entries expiring `ttl_s` after their last write.

    Idempotent: created when missing with `replicas` (the service's NATS_STREAM_REPLICAS),
    its TTL brought to `ttl_s` when it differs, its stream (`KV_<bucket>`) scaled up when it
    has fewer replicas (never down), logged.
    """
    try:
        kv = await js.key_value(bucket)
    except BucketNotFoundError:
        return await js.create_key_value(
            bucket=bucket,
            description=description,
            history=1,
            ttl=ttl_s,
            replicas=replicas,
            storage=api.StorageType.FILE,
        )
    status = await kv.status()
    config = status.stream_info.config
    have = config.num_replicas or 1
    ttl_differs = status.ttl is None or abs(status.ttl - ttl_s) > 1e-6
    if ttl_differs or have < replicas:
        await js.update_stream(
            config.evolve(
                max_age=ttl_s,
                duplicate_window=min(config.duplicate_window or ttl_s, ttl_s),
                num_replicas=max(have, replicas),
            )
        )
    if ttl_differs:
        log.info("lease bucket %s: ttl %s → %s s", bucket, status.ttl, ttl_s)
    if have < replicas:
        log.warning(
            "lease bucket %s scaled up from %d to %d replicas (NATS_STREAM_REPLICAS)",
            bucket,
            have,
            replicas,
        )
        await wait_replicated(js, f"KV_{bucket}", replicas)
    return kv


async def open_lease_bucket(
    js: JetStreamContext, bucket: str, *, ttl_s: float
) -> tuple[KeyValue, float]:
    """The provisioned KV bucket `bucket` and the TTL its entries expire by, for a service that
    may not create or change a bucket (issue 29 item 1: provisioning, `lease_bucket` as ops).

    BusNotProvisioned (logged) when the bucket does not exist. A bucket whose TTL differs from
    the service's `ttl_s` keeps its own (the server expires entries by it), logged: the lease
    then uses the bucket's TTL."""
    try:
        kv = await js.key_value(bucket)
    except BucketNotFoundError:
        await require(js, bucket, buckets=[bucket])
        raise
    status = await kv.status()
    have = status.ttl
    if have is None or have <= 0:
        raise JetStreamConfigError(f"lease bucket {bucket} has no TTL: provision it again")
    if abs(have - ttl_s) > 1e-6:
        log.warning(
            "lease bucket %s: provisioned ttl %g s applies, not the setting's %g s",
            bucket,
            have,
            ttl_s,
        )
    return kv, have


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class KvLease:
    """One lease key held by `holder`; see the module docstring for what it guarantees."""

    def __init__(
        self,
        kv: KeyValue,
        key: str,
        *,
        holder: str,
        ttl_s: float,
        renew_every_s: float | None = None,
        margin: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.kv = kv
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_s
        self.renew_every_s = renew_every_s or ttl_s / 3
        check_timing(ttl_s, self.renew_every_s, margin)
        self.margin = margin
        # Set when a lease we held is lost (taken over, expired, unrenewable); cleared on acquire.
        self.lost = asyncio.Event()
        self._clock = clock
        self._sleep = sleep
        self._revision: int | None = None
        self._valid_until = 0.0
        self._acquired_at = ""
        self._renewer: asyncio.Task[None] | None = None

    @property
    def held(self) -> bool:
        """True while the lease is ours and our local deadline has not passed."""
        return self._revision is not None and self._clock() < self._valid_until

    @property
    def token(self) -> int | None:
        """The revision we wrote last (grows with every write): a fencing token while held."""
        return self._revision if self.held else None

    def _value(self) -> bytes:
        record = LeaseRecord(
            holder=self.holder, acquired_at=self._acquired_at, renewed_at=_now(), ttl_s=self.ttl_s
        )
        return record.model_dump_json().encode()

    def _granted(self, revision: int, sent_at: float) -> None:
        self._revision = revision
        self._valid_until = holder_deadline(sent_at, self.ttl_s, self.margin)

    async def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; True when it is ours (renewed in the background)."""
        if self.held:
            return True
        self._acquired_at = _now()
        sent_at = self._clock()
        try:
            revision = await self.kv.create(self.key, self._value())
        except (WrongRevision, KeyNotFoundError):
            # KeyNotFoundError: nats-py's create, refused because the key existed, looks the key
            # up to see whether it was a delete marker; when the holder's entry expires (the
            # bucket's max age) between the two, the look-up finds nothing. The key is free
            # then, and the next poll takes it (seen under load in CI-like runs).
            return False
        self._granted(revision, sent_at)
        self.lost.clear()
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_forever(), name=f"lease:{self.key}")
        log.info("lease %s acquired by %s (revision %s)", self.key, self.holder, revision)
        return True

    async def acquire(self, *, timeout_s: float | None = None, poll_s: float | None = None) -> bool:
        """Try until the lease is ours or `timeout_s` passes (None: forever); True when held."""
        poll = poll_s if poll_s is not None else min(1.0, self.ttl_s / 4)
        deadline = None if timeout_s is None else self._clock() + timeout_s
        while True:
            if await self.try_acquire():
                return True
            if deadline is not None and self._clock() + poll > deadline:
                return False
            await self._sleep(poll)

    async def renew(self) -> None:
        """One compare-and-swap renewal; LeaseLost when the key moved on without us."""
        if self._revision is None:
            raise LeaseLost(f"lease {self.key} is not held by {self.holder}")
        sent_at = self._clock()
        try:
            revision = await self.kv.update(self.key, self._value(), last=self._revision)
        except WrongRevision:
            # A renewal whose answer was lost may have landed: then the entry is still ours.
            if await self._adopt_own_revision():
                return await self.renew()
            self._lose("another holder took it, or it expired")
            raise LeaseLost(f"lease {self.key} was lost by {self.holder}") from None
        self._granted(revision, sent_at)

    async def _adopt_own_revision(self) -> bool:
        try:
            entry = await self.kv.get(self.key)
            record = LeaseRecord.model_validate_json(entry.value or b"")
        except (KeyNotFoundError, ValidationError):
            return False
        if record.holder != self.holder or entry.revision is None:
            return False
        if entry.revision == self._revision:
            return False
        self._revision = entry.revision
        return True

    async def release(self) -> None:
        """Stop renewing; delete the key if still ours, so the next holder need not wait."""
        await self._stop_renewing()
        revision, self._revision = self._revision, None
        if revision is None:
            return
        try:
            await self.kv.delete(self.key, last=revision)
            log.info("lease %s released by %s", self.key, self.holder)
        except APIError as e:
            if e.err_code not in _WRONG_LAST_SEQUENCE:
                raise

    async def current_holder(self) -> str | None:
        """Who holds the key now, as the server sees it (None when free)."""
        try:
            entry = await self.kv.get(self.key)
            return LeaseRecord.model_validate_json(entry.value or b"").holder
        except (KeyNotFoundError, ValidationError):
            return None

    async def run_exclusive(self, fn: Callable[[], Awaitable[T]]) -> tuple[bool, T | None]:
        """Run `fn` if the lease can be taken now, cancelling it if the lease is lost.

        Returns (False, None) when someone else holds the lease, (True, result) after a run;
        raises LeaseLost when the lease was lost during the run (the work was cancelled).
        """
        if not await self.try_acquire():
            return False, None
        work = asyncio.ensure_future(fn())
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                raise LeaseLost(f"lease {self.key} was lost while {self.holder} worked")
            return True, work.result()
        finally:
            lost.cancel()
            if not work.done():
                work.cancel()
            await self.release()

    async def __aenter__(self) -> KvLease:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def _lose(self, why: str) -> None:
        if self._revision is not None:
            log.warning("lease %s lost by %s: %s", self.key, self.holder, why)
        self._revision = None
        self.lost.set()

    async def _stop_renewing(self) -> None:
        task, self._renewer = self._renewer, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew_forever(self) -> None:
        """Renew every renew_every_s; on errors retry sooner until the local deadline passes."""
        delay = self.renew_every_s
        while self._revision is not None:
            await self._sleep(max(0.0, min(delay, self._valid_until - self._clock())))
            if self._revision is None:
                return
            if self._clock() >= self._valid_until:
                self._lose("not renewed before its local deadline (NATS unreachable?)")
                return
            try:
                await self.renew()
                delay = self.renew_every_s
            except LeaseLost:
                return
            except Exception as e:
                log.warning("lease %s: renewal failed (%s); retrying", self.key, e)
                delay = self.renew_every_s / 4
