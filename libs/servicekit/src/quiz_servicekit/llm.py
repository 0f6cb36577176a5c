"""The typed client of the llm-gateway: `complete`, `availability`, `usage` over NATS.

Every service that calls a model goes through it, so each sees the gateway the same way:
- `complete` waits for the call's own deadline plus a margin (the gateway stops retrying before
  the deadline and must have time to say why), and lets through only the codes a caller may
  show a person (ADR-059 §5, ADR-060, ADR-071): `llm_not_configured`, `llm_budget_exhausted`,
  `rate_limited`, `llm_failed`. Anything else (no gateway, a timeout, a reply we cannot read,
  a request the gateway refused) is `llm_failed`: our fault upstream, not the person's. Two
  exceptions, the person's own doing: a request too large for the bus, `payload_too_large`
  (413), and an Idempotency-Key sent again with another body, `idempotency_key_reused` (422).
- `complete` stamps the call's absolute deadline (`deadline_at`, from `deadline_s`): a gateway
  that gets the message after it (paused, backlogged) makes no provider request for it.
- `complete` never turns a lost reply into a second payment: a call that carries a
  `request_id` and loses its connection, or has no reply in time, is sent again with the same
  id (at most `MAX_REPEATS` times, and never past deadline + margin + `repeat_timeout_s` in
  all); the gateway answers a repeat from its stored reply, or joins the call still in hand, so
  a paid answer is had again for free. Nobody answering (a gateway restarting) is waited out
  for `unreachable_wait_s`. When all that fails the error is `LlmNotAnswered` (llm_failed to a
  person; for a work queue: not a final outcome, retry later with the same id).
- `availability` fails closed: when the gateway cannot be asked, no model can be called.
- `complete` is sent on the caller's own subject `llm.v1.complete.<bus user>` (issue 29 item
  5): the user the connection logged in as (its reply prefix `_INBOX_<user>`), or `caller`.
  The locked bus lets each user publish its own only, and the gateway allows each caller its
  purposes (quiz_contracts.llm.CALLER_PURPOSES). The operators (`ops`) and an open bus (no
  user) send on the plain `llm.v1.complete`.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from nats.aio.client import Client as NATS

from quiz_contracts import bus, subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import (
    AvailabilityReply,
    AvailabilityRequest,
    CompleteReply,
    CompleteRequest,
    Purpose,
    UsageReply,
    UsageRequest,
)
from quiz_servicekit.natsio import NotAnswered, request

# What a caller may see of a gateway failure; every other code leaves as llm_failed.
CALLER_CODES = frozenset(
    {
        ErrorCode.llm_not_configured,
        ErrorCode.llm_budget_exhausted,
        ErrorCode.rate_limited,
        ErrorCode.llm_failed,
        # A request id (an Idempotency-Key's) sent again with another request: the caller's
        # mistake, 422 (issue 29 item 10).
        ErrorCode.idempotency_key_reused,
    }
)
# The gateway's own deadline for a call that names none (its LLM_GATEWAY_DEFAULT_DEADLINE_S).
GATEWAY_DEFAULT_DEADLINE_S = 60.0
# Sends of one call after the first whose reply was lost (connection lost, or none in time).
MAX_REPEATS = 2
# How often a call in flight looks at its connection (a reply sent while it was down is lost).
WATCH_S = 0.1
# First pause after "no responders" (doubles, at most 1 s): a gateway replica restarting.
NO_RESPONDERS_PAUSE_S = 0.25
# What a caller is told to wait before asking again when the gateway did not answer.
NOT_ANSWERED_RETRY_S = 5.0


class LlmNotAnswered(ContractError):
    """No final answer: no gateway reachable, no reply in time even to a repeat, the
    connection lost, or the gateway itself `unavailable` (its database out, say).

    Code `llm_failed` (what a person is shown), `retry_after_s` set. Not an outcome to store:
    the same request (same `request_id`) may be sent again later, and a call the gateway did
    make and pay is then answered from its stored reply, free.
    """


class _ConnectionLost(Exception):
    """Our connection dropped while a call was in flight: its reply may have been lost."""


def with_deadline_at(call: CompleteRequest, wait_s: float | None = None) -> CompleteRequest:
    """`call` stamped with its absolute deadline: now + deadline_s, or + `wait_s` when this
    send is waited for less (a repeat), or an earlier one the call carries. The gateway starts
    no provider request past it, however late the message reaches it. Stamp each send: a
    repeat of a request id gets a deadline of its own."""
    left = call.deadline_s or GATEWAY_DEFAULT_DEADLINE_S
    if wait_s is not None:
        left = min(left, wait_s)
    at = datetime.now(UTC) + timedelta(seconds=left)
    if call.deadline_at is not None and call.deadline_at < at:
        return call
    return call.model_copy(update={"deadline_at": at})


def caller_of(nc: NATS) -> str | None:
    """The bus user a connection logged in as, from its reply prefix `_INBOX_<user>`
    (quiz_servicekit.natsio.inbox_prefix_for); None for nats-py's default `_INBOX`."""
    prefix = bytes(getattr(nc, "_inbox_prefix", b"")).decode()
    head = bus.inbox_prefix("")
    return prefix[len(head) :] or None if prefix.startswith(head) else None


def complete_subject(caller: str | None) -> str:
    """Where `caller`'s model calls go: `llm.v1.complete.<caller>`, the plain subject for the
    operators and an open bus."""
    if caller is None or caller == "ops":
        return subjects.LLM_COMPLETE
    return subjects.llm_complete_subject(caller)


class LlmClient:
    """The llm-gateway seen from a service: typed calls, the caller-facing error codes.

    `caller`: the bus user whose subject `complete` uses (default: the connection's, see
    `caller_of`)."""

    def __init__(
        self,
        nc: NATS,
        *,
        caller: str | None = None,
        deadline_margin_s: float = 5.0,
        query_timeout_s: float = 5.0,
        repeat_timeout_s: float = 5.0,
        unreachable_wait_s: float = 5.0,
    ) -> None:
        self._nc = nc
        self.subject = complete_subject(caller if caller is not None else caller_of(nc))
        self.deadline_margin_s = deadline_margin_s
        self.query_timeout_s = query_timeout_s
        # A repeat is answered from the stored reply at once, or joins the call in hand.
        self.repeat_timeout_s = repeat_timeout_s
        self.unreachable_wait_s = unreachable_wait_s

    async def complete(self, call: CompleteRequest) -> CompleteReply:
        """One model call; ContractError with one of CALLER_CODES on any failure.

        The first reply is awaited for the call's deadline + `deadline_margin_s`; a lost one
        (connection dropped, or none in time) is asked for again with the same request —
        only when it has a `request_id`, so the gateway can answer the repeat without paying
        again — at most MAX_REPEATS times, each repeat waiting at least `repeat_timeout_s`,
        all within deadline + margin + `repeat_timeout_s`. No responders (nothing delivered)
        is sent again for `unreachable_wait_s`. Unanswered in the end: `LlmNotAnswered`.
        """
        deadline = call.deadline_s or GATEWAY_DEFAULT_DEADLINE_S
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer_by = started + deadline + self.deadline_margin_s
        give_up_at = answer_by + self.repeat_timeout_s
        repeats, pause = 0, NO_RESPONDERS_PAUSE_S
        while True:
            # A repeat waits at least repeat_timeout_s (its answer is stored or in hand).
            until = give_up_at if repeats else answer_by
            if not await self._connected(until):
                raise self._not_answered("no connection to the bus")
            now = loop.time()
            timeout = answer_by - now
            if repeats:
                timeout = max(timeout, min(self.repeat_timeout_s, give_up_at - now))
            if timeout <= 0:
                raise self._not_answered(f"no reply within {give_up_at - started:g} s")
            try:
                return await self._send(call, timeout)
            except NotAnswered as e:
                if not e.delivered:
                    # Nobody received it: sending again is safe, with or without an id.
                    if loop.time() + pause <= started + self.unreachable_wait_s:
                        await asyncio.sleep(pause)
                        pause = min(1.0, pause * 2)
                        continue
                    raise self._not_answered(e.message) from e
                if self._may_repeat(call, repeats) and loop.time() < give_up_at:
                    repeats += 1
                    continue
                why = f"{self.subject} did not answer within {answer_by - started:g} s"
                if repeats:
                    # Never the request id itself: it is internal (issue 29 item 10).
                    why += f", nor {repeats} repeat(s) of the call"
                raise self._not_answered(why) from e
            except _ConnectionLost as e:
                if self._may_repeat(call, repeats):
                    repeats += 1
                    continue
                raise self._not_answered("the connection to the gateway was lost") from e
            except ContractError as e:
                if e.code in CALLER_CODES or e.code is ErrorCode.payload_too_large:
                    raise
                if e.code is ErrorCode.unavailable:
                    # The gateway's own "not now" (its database out): retry later, same id.
                    raise LlmNotAnswered(
                        ErrorCode.llm_failed,
                        f"The model could not be called: {e.message}",
                        retry_after_s=e.retry_after_s or NOT_ANSWERED_RETRY_S,
                    ) from e
                raise ContractError(
                    ErrorCode.llm_failed,
                    f"The model could not be called: {e.message}",
                    retry_after_s=e.retry_after_s,
                ) from e

    @staticmethod
    def _may_repeat(call: CompleteRequest, repeats: int) -> bool:
        # Without a request id a repeat would be a second call, paid again: never.
        return call.request_id is not None and repeats < MAX_REPEATS

    @staticmethod
    def _not_answered(why: str) -> LlmNotAnswered:
        return LlmNotAnswered(
            ErrorCode.llm_failed,
            f"The model could not be called: {why}",
            retry_after_s=NOT_ANSWERED_RETRY_S,
        )

    async def _connected(self, until: float) -> bool:
        """Wait (until the loop time `until`) for the connection; False if closed or too late."""
        loop = asyncio.get_running_loop()
        while not self._nc.is_connected:
            # Draining or closed: the service is stopping, no reconnect is coming.
            if self._nc.is_closed or self._nc.is_draining or loop.time() >= until:
                return False
            await asyncio.sleep(WATCH_S)
        return True

    async def _send(self, call: CompleteRequest, timeout: float) -> CompleteReply:
        """One send of `call`; _ConnectionLost when the connection drops before its reply
        (watched only for a call with a request id: without one a repeat is never made, so
        the reply that may still come after the reconnect is awaited instead)."""
        reconnects = self._nc.stats["reconnects"]
        sent = asyncio.ensure_future(
            request(
                self._nc,
                self.subject,
                with_deadline_at(call, timeout),
                CompleteReply,
                timeout=timeout,
                unavailable_code=ErrorCode.llm_failed,
            )
        )
        try:
            while True:
                done, _ = await asyncio.wait({sent}, timeout=WATCH_S)
                if done:
                    return sent.result()
                # Reconnecting (or reconnected since the send): a reply published meanwhile
                # is gone. A draining connection still delivers what comes: not a loss.
                if call.request_id is not None and (
                    self._nc.is_reconnecting or self._nc.stats["reconnects"] != reconnects
                ):
                    raise _ConnectionLost
        finally:
            if not sent.done():
                sent.cancel()
                with contextlib.suppress(asyncio.CancelledError, ContractError):
                    await sent

    async def availability(self, purpose: Purpose | None = None) -> AvailabilityReply:
        """Whether a model can be called now; unavailable (llm_failed) when nobody answers."""
        try:
            return await request(
                self._nc,
                subjects.LLM_AVAILABILITY,
                AvailabilityRequest(purpose=purpose),
                AvailabilityReply,
                timeout=self.query_timeout_s,
            )
        except ContractError:
            # Fail closed: offering a button that can only fail is worse than hiding it.
            return AvailabilityReply(
                available=False,
                reason=ErrorCode.llm_failed,
                models={},
                remaining_usd=Decimal(0),
            )

    async def usage(
        self,
        day: date | None = None,
        billed_to: str | None = None,
        estimate: CompleteRequest | None = None,
        prompt_chars: int | None = None,
    ) -> UsageReply:
        """The day's spend (today, Europe/Zurich, by default); ContractError when unanswered.

        With `estimate`, the reply's `estimate_usd` is the worst case the gateway would hold
        for exactly that request (ADR-060 §5); with `prompt_chars` too, `share_estimate_usd`
        is that request's worst case as the platform's night computes it (FACTS E).
        """
        return await request(
            self._nc,
            subjects.LLM_USAGE,
            UsageRequest(
                day=day, billed_to=billed_to, estimate=estimate, prompt_chars=prompt_chars
            ),
            UsageReply,
            timeout=self.query_timeout_s,
        )
