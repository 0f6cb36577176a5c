"""The request_id story of the gateway: one answer per request id across replicas.

`RequestIds.claim` is the whole story as one `async with`, read top-down by the service:

    async with requests.claim(req, key, digest) as claim:
        if claim.kept is not None:
            return claim.kept          # joined, or kept by another replica
        reply = ...                    # the call (claim.call_id)
        claim.keep(reply)

On this replica a repeat joins the call in hand (the kit's `SingleFlight`: its `kept` is that
call's reply, or it raises that call's error); across replicas the database's
`idempotency_keys` row decides who calls: the owner calls, a repeat waits for its kept reply,
the same id with another request is refused. A failed call releases its claim at the block's
exit (or, while the database is away, at the next sweep: `release_unreleased`); a paid reply
(`claim.keep`) is kept at the exit for `idempotency_ttl_s`, before any joiner gets it. Only a
success is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.domain.deadlines import time_left_s
from quiz_llm_gateway.domain.ids import new_id
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Repository, outage_error
from quiz_llm_gateway.settlement.ledger import Ledger
from quiz_servicekit.singleflight import SingleFlight

log = logging.getLogger(__name__)
# How often a repeat waits on another replica's call of the same request_id.
IDEMPOTENCY_POLL_S = 0.05


@dataclass(slots=True)
class RequestClaim:
    """A request id in hand: `kept`, the reply to give (joined on this replica, or kept by
    another replica's call), else this call owns the id as `call_id` and calls."""

    call_id: str
    kept: CompleteReply | None = None
    reply: CompleteReply | None = field(default=None, init=False)

    def keep(self, reply: CompleteReply) -> None:
        """The paid reply of the owner's call: kept at the block's exit, then given to joiners."""
        self.reply = reply


class RequestIds:
    """The claims and kept replies of request ids (`purpose:payer:request_id` keys)."""

    def __init__(
        self,
        repo: Repository,
        ledger: Ledger,
        settings: Settings,
        metrics: GatewayMetrics,
        *,
        models: Mapping[str, str],
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        self.repo = repo
        self.ledger = ledger
        self.settings = settings
        self.metrics = metrics
        self.models = models
        self.clock = clock
        self.monotonic = monotonic
        self._single = SingleFlight[CompleteReply](settings.idempotency_ttl_s, monotonic)
        # Request ids whose call failed while the database was away (key -> call id): released
        # at the next sweep, not left to expire (deadline + grace) while their callers repeat.
        self._unreleased: dict[str, str] = {}

    @contextlib.asynccontextmanager
    async def claim(
        self, req: CompleteRequest, key: str, digest: str
    ) -> AsyncIterator[RequestClaim]:
        """The request id `key` (`purpose:payer:request_id`) for the request of `digest`.

        Enters with `kept` set when a call of this replica answers it (joined: its reply; its
        error is raised here) or another replica's call kept a reply; else this call owns the
        id. Raises `idempotency_key_reused` (the id with another digest), `unavailable` (the
        database cannot be reached: counted in calls_total; or another replica still answers
        it at the deadline). At the exit: an error or a cancellation releases the id and goes
        to the joiners; a success keeps `claim.reply` (database, else journal), then answers
        the joiners with it (remembered `idempotency_ttl_s`).
        """
        loop = asyncio.get_running_loop()
        led: asyncio.Future[RequestClaim] = loop.create_future()
        answer: asyncio.Future[CompleteReply] = loop.create_future()

        async def lead() -> CompleteReply:
            # This call leads on this replica: the database decides across replicas.
            led.set_result(await self._claim_id(req, key, digest))
            return await answer

        flight = asyncio.ensure_future(self._single.run(f"{key}#{digest}", lead))
        try:
            await asyncio.wait((led, flight), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await self._abandon(flight, led, key)
            raise
        if not led.done():  # joined this replica's call: its reply, or its error raised here
            yield RequestClaim("", kept=flight.result())
            return
        claim = led.result()
        try:
            yield claim
        except BaseException as e:
            if claim.kept is None:
                # Only a success is kept: a failed call may be asked again; the error stands.
                await self.release(key, claim.call_id)
            await _fail(answer, flight, e)
            raise
        try:
            reply = (
                claim.kept
                if claim.kept is not None
                else await self._keep_claimed(key, digest, claim)
            )
        except BaseException as e:  # cancelled while keeping: a joiner asks the database again
            await _fail(answer, flight, e)
            raise
        answer.set_result(reply)
        await asyncio.shield(flight)

    async def _keep_claimed(self, key: str, digest: str, claim: RequestClaim) -> CompleteReply:
        """Keep the owner's paid reply before anyone else gets it."""
        if claim.reply is None:
            raise RuntimeError("a claimed request id left without a reply kept")
        # Paid: the reply goes to its caller whatever becomes of this write (the database, else
        # the journal, which any replica replays into idempotency_keys).
        await self._keep(key, digest, claim.call_id, claim.reply)
        return claim.reply

    async def _abandon(
        self, flight: asyncio.Future[CompleteReply], led: asyncio.Future[RequestClaim], key: str
    ) -> None:
        """The caller cancelled before its block: its id released if it owned it already."""
        flight.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(flight)
        if led.done() and not led.cancelled() and led.result().kept is None:
            await self.release(key, led.result().call_id)

    async def _claim_id(self, req: CompleteRequest, key: str, digest: str) -> RequestClaim:
        """The database's claim of `key` for a new call id (journals replayed first while they
        hold entries); a database away is `unavailable`, counted once, by the leader."""
        if self.ledger.maybe_pending():
            await self.ledger.catch_up()
        call_id = new_id()
        deadline_s = max(time_left_s(req, self.settings.default_deadline_s, self.clock), 0.0)
        try:
            kept = await self._claim_row(req, key, digest, call_id, deadline_s)
        except Exception as e:
            mapped = outage_error(e, self.settings.outage_retry_after_s)
            if mapped is None:
                raise
            purpose = req.purpose.value
            m = self.metrics
            m.child(m.calls, purpose, self.models[purpose], mapped.code.value).inc()
            raise mapped from e
        return RequestClaim(call_id, kept=kept)

    async def _claim_row(
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

    async def _keep(self, key: str, digest: str, call_id: str, reply: CompleteReply) -> None:
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


async def _fail(
    answer: asyncio.Future[CompleteReply], flight: asyncio.Future[CompleteReply], e: BaseException
) -> None:
    """The owner's block failed with `e`: its joiners get `e`; a cancellation is the owner's
    own, so a joiner calls in its place (the kit's SingleFlight)."""
    if isinstance(e, asyncio.CancelledError):
        answer.cancel()
    else:
        answer.set_exception(e)
    with contextlib.suppress(BaseException):  # the flight re-raises `e`: already the caller's
        await asyncio.shield(flight)


def request_digest(req: CompleteRequest) -> str:
    """SHA-256 of what the request asks (request_id and the deadlines aside: a retry may carry
    less time left), in a canonical JSON form."""
    body = req.model_dump(mode="json", exclude={"request_id", "deadline_s", "deadline_at"})
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
