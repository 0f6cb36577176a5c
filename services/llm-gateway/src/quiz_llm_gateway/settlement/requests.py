"""The request_id story of the gateway: one answer per request id across replicas.

On this replica a repeat joins the call in hand (the kit's `SingleFlight`); across replicas the
database's `idempotency_keys` row decides who calls (`claim`): the owner calls, a repeat waits
for its kept reply, the same id with another request is refused. A failed call releases its
claim (`release`), or, while the database is away, at the next sweep (`release_unreleased`);
a paid reply is kept (`keep`) for `idempotency_ttl_s`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.settlement.ledger import Ledger
from quiz_servicekit.singleflight import SingleFlight

log = logging.getLogger(__name__)
# How often a repeat waits on another replica's call of the same request_id.
IDEMPOTENCY_POLL_S = 0.05


class RequestIds:
    """The claims and kept replies of request ids (`purpose:payer:request_id` keys)."""

    def __init__(
        self,
        repo: Repository,
        ledger: Ledger,
        settings: Settings,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.repo = repo
        self.ledger = ledger
        self.settings = settings
        self.clock = clock
        self.monotonic = monotonic
        self._single = SingleFlight[CompleteReply](settings.idempotency_ttl_s, monotonic)
        # Request ids whose call failed while the database was away (key -> call id): released
        # at the next sweep, not left to expire (deadline + grace) while their callers repeat.
        self._unreleased: dict[str, str] = {}

    async def once(
        self, key: str, digest: str, answer: Callable[[], Awaitable[CompleteReply]]
    ) -> CompleteReply:
        """`answer()` once for the key and digest on this replica: a repeat joins it."""
        return await self._single.run(f"{key}#{digest}", answer)

    async def claim(
        self, req: CompleteRequest, key: str, digest: str, call_id: str, deadline_s: float
    ) -> CompleteReply | None:
        """None once `call_id` owns the key (it calls); the reply kept for it, when kept.

        Waits (at most `deadline_s`) while another replica answers it. Raises
        `idempotency_key_reused` for the id used with another digest, `unavailable`
        (retry_after_s 1) once the wait is over; raises what the database raised (an outage is
        the caller's `unavailable`).
        """
        waited_until = self.monotonic() + deadline_s
        while True:
            now = self.clock()
            # A claim outlives the call's own hold: a crashed owner's key frees after that.
            until = now + deadline_s + self.settings.reservation_grace_s
            claim = await self.repo.claim_request(key, digest, call_id, now, until)
            if claim.owner:
                return None
            if claim.digest is not None and claim.digest != digest:
                # Issue 29 item 10: the caller's own code, and no internal id in the message
                # (a person reads it, through the service that made the id).
                log.info("request id %r reused with another request: refused", req.request_id)
                raise ContractError(
                    ErrorCode.idempotency_key_reused,
                    "This idempotency key was already used with a different request: send a "
                    "new key for a new request.",
                )
            if claim.reply is not None:
                return CompleteReply.model_validate_json(claim.reply)
            if claim.digest is not None:
                # Another replica is answering it: wait for its reply (or its failure).
                if self.monotonic() >= waited_until:
                    # Not a failure of the call: it may yet be answered and kept; the caller
                    # asks again with the same id later (unavailable: retry, never final).
                    raise ContractError(
                        ErrorCode.unavailable,
                        f"request_id {req.request_id!r} is still being answered elsewhere",
                        retry_after_s=1.0,
                    )
                await asyncio.sleep(IDEMPOTENCY_POLL_S)

    async def release(self, key: str, call_id: str) -> None:
        """Free the key of a failed call (only a success is kept: it may be asked again).

        When the database is away the release waits for the next sweep (a repeat meanwhile
        waits or is told `unavailable`); never raises but a cancellation.
        """
        try:
            await asyncio.shield(self.repo.forget_request(key, call_id))
        except Exception as e:
            self._unreleased[key] = call_id
            log.warning("request %s not released yet (%s)", key, type(e).__name__)

    async def keep(self, key: str, digest: str, call_id: str, reply: CompleteReply) -> None:
        """Keep a paid reply for `idempotency_ttl_s`: the database, else the journal, which any
        replica replays into idempotency_keys."""
        now = self.clock()
        until = now + self.settings.idempotency_ttl_s
        await self.ledger.keep_reply(key, digest, call_id, reply, until, now)

    async def release_unreleased(self) -> None:
        """Release the request ids whose failed call could not release them (the database was
        away); the first refusal stops the round, the rest wait for the next sweep."""
        for key, call_id in list(self._unreleased.items()):
            await self.repo.forget_request(key, call_id)
            del self._unreleased[key]
            log.info("request %s released after the outage", key)


def request_digest(req: CompleteRequest) -> str:
    """SHA-256 of what the request asks (request_id and the deadlines aside: a retry may carry
    less time left), in a canonical JSON form."""
    body = req.model_dump(mode="json", exclude={"request_id", "deadline_s", "deadline_at"})
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
