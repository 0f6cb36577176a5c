"""NATS endpoints of poll, the platform's edge: open / run again, close, join.

Decode → call the service → encode. Each replies `PollAck` (the poll as it stands) or
`{code, message}` (404 `not_found` for an evaluation with no brainstorm).
"""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.poll import BrainstormClose, BrainstormOpen, PollAck, PollJoin
from quiz_poll.cache import LivePoll
from quiz_poll.service import PollService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint


def ack(live: LivePoll) -> PollAck:
    """The poll as it stands."""
    return PollAck(
        evaluation_id=live.row.evaluation_id,
        settings=live.settings,
        joined=live.tally.joined,
        answered=live.tally.answered,
        closed=live.row.closed_at is not None,
        frozen=live.row.frozen_at is not None,
    )


def endpoints(service: ServiceRef[PollService]) -> list[EndpointSpec[Any]]:
    """`poll.v1.open`, `poll.v1.close`, `poll.v1.join`."""

    async def open_(request: BrainstormOpen, _: MsgContext) -> PollAck:
        return ack(await service().open(request))

    async def close(request: BrainstormClose, _: MsgContext) -> PollAck:
        return ack(await service().close(request))

    async def join(request: PollJoin, _: MsgContext) -> PollAck:
        return ack(await service().join(request))

    return [
        endpoint(subjects.POLL_OPEN, open_),
        endpoint(subjects.POLL_CLOSE, close),
        endpoint(subjects.POLL_JOIN, join),
    ]
