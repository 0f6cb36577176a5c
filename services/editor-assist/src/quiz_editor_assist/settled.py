"""Settled runs kept with the gateway's stored replies (issue 29, item 6).

A wand request sent again (a retry, a double click, a script) is named by the same request id
and answered by the gateway from its stored reply, free; before, the teacher's code then ran
again on the runner every time (12 identical calls: 1 ledger row, 72 runner cases). The runner's
reply is now kept beside the stored reply, in the cluster's NATS KV bucket `generate_settled`
(every replica reads what another wrote; nothing on one replica's disk):

- key: sha256 of the model call's request id and the `call_id` of the reply the gateway gave
  (a new model call, after the stored reply expired, is a new proposal: it runs afresh);
- value: the sha256 of the run request and the runner's reply. A reply is reused only for the
  identical run request (same code, cases and limits), so it is what running would give again.
- entries expire with the gateway's stored replies: the bucket's TTL, provisioned from
  `quiz_contracts.topology.GENERATE_SETTLED_TTL_S` (600 s, the gateway's
  `LLM_GATEWAY_IDEMPOTENCY_TTL_S` default).

Only a run that happened is kept: a busy or absent runner leaves nothing, so the next try runs.
The store is a saving, not a source of truth: when NATS cannot read or write it, the run simply
happens (and the miss is logged).
"""

from __future__ import annotations

import hashlib
import json
import logging

from nats.errors import Error as NatsError
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import ValidationError

from quiz_contracts.runner import RunReply, RunRequest
from quiz_contracts.topology import GENERATE_SETTLED_BUCKET

log = logging.getLogger(__name__)

BUCKET = GENERATE_SETTLED_BUCKET


def settled_key(request_id: str, call_id: str) -> str:
    """The KV key of one model reply's settled run (hex: KV keys allow few characters)."""
    return hashlib.sha256(f"{request_id}\0{call_id}".encode()).hexdigest()


def run_digest(run: RunRequest) -> str:
    """What identifies a run request: its canonical JSON, hashed."""
    return hashlib.sha256(run.model_dump_json().encode()).hexdigest()


class SettledRuns:
    """The runner's replies by (request id, call id), in the KV bucket `generate_settled`."""

    def __init__(self, kv: KeyValue, *, max_bytes: int) -> None:
        """`max_bytes`: the largest value the bus carries (a larger reply is not kept)."""
        self._kv = kv
        self._max_bytes = max_bytes

    async def get(self, key: str, run: RunRequest) -> RunReply | None:
        """The kept reply of this very run request, or None (missing, another run, unreadable)."""
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        except (NatsError, TimeoutError) as e:
            log.warning("settled runs: cannot read %s: %s", key[:12], e)
            return None
        try:
            kept = json.loads(entry.value or b"")
            if kept.get("run") != run_digest(run):
                return None
            return RunReply.model_validate(kept["reply"])
        except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
            log.warning("settled runs: entry %s unreadable, ignored", key[:12])
            return None

    async def put(self, key: str, run: RunRequest, reply: RunReply) -> bool:
        """Keep `reply` for `run` under `key`; False when it was not kept (too large, NATS)."""
        value = json.dumps(
            {"run": run_digest(run), "reply": reply.model_dump(mode="json")},
            separators=(",", ":"),
        ).encode()
        if len(value) > self._max_bytes:
            return False
        try:
            await self._kv.put(key, value)
        except (NatsError, TimeoutError) as e:
            log.warning("settled runs: cannot keep %s: %s", key[:12], e)
            return False
        return True
