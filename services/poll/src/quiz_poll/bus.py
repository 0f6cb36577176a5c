"""poll's NATS transport, at the edge: the frames it publishes and reads, the AI jobs it queues.

One job: the messages, nothing of what they mean.
- `publish_frame`: a poll's frame on `poll.v1.<evaluation>.tally` (the platform's realtime layer
  reads it; the other replicas too).
- `listen`: every poll's frames (`poll.v1.*.tally`), decoded to (evaluation, seq) for
  `PollCache.remote_frame`; a frame that does not read is ignored.
- `queue_ai_job`: a `PollAiJob` on the JetStream work queue POLL_AI under its `Nats-Msg-Id`.
  A publish the stream refuses or does not acknowledge (a replicated stream electing a new
  leader, its ack lost) may still have been stored, so it is offered again under the same id —
  stored at most once, in the duplicate window — for up to `AI_JOB_QUEUE_S`; False when there is
  no JetStream or the stream stayed away that long (the caller then runs the pass itself).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError
from quiz_contracts.poll import PollAiJob
from quiz_servicekit.jetstream import publish

log = logging.getLogger(__name__)

# How long an AI pass job is offered to its stream (same Nats-Msg-Id) before the pass runs on
# this replica: longer than a replicated stream takes to elect a new leader (a few seconds).
AI_JOB_QUEUE_S = 20.0


class PollBus:
    """The poll's publishes and its one subscription (see the module docstring).

    `monotonic` (s) and `sleep` pace the AI job's offers (0.25 s, doubling, at most 2 s apart).
    """

    def __init__(
        self,
        nc: NATS,
        js: JetStreamContext | None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.nc = nc
        self.js = js
        self.monotonic = monotonic
        self.sleep = sleep
        self._frames_sub: Subscription | None = None

    async def publish_frame(self, evaluation_id: str, data: bytes) -> None:
        """One encoded `PollTallyFrame` on the poll's tally subject."""
        await self.nc.publish(subjects.poll_tally_subject(evaluation_id), data)

    async def listen(self, on_frame: Callable[[str, int], None]) -> None:
        """Hear every poll's frames: `on_frame(evaluation, seq)` for each that reads."""

        async def frame(msg: Msg) -> None:
            try:
                data = json.loads(msg.data)
                evaluation_id, seq = str(data["evaluationId"]), int(data["seq"])
            except (ValueError, KeyError, TypeError):
                return
            on_frame(evaluation_id, seq)

        self._frames_sub = await self.nc.subscribe(subjects.poll_tally_filter(), cb=frame)

    async def queue_ai_job(self, job: PollAiJob, msg_id: str) -> bool:
        """The job stored on POLL_AI (True), or no JetStream / the stream away (False)."""
        if self.js is None:
            return False
        give_up = self.monotonic() + AI_JOB_QUEUE_S
        pause = 0.25
        while True:
            try:
                await publish(self.js, subjects.POLL_AI_JOBS, job, msg_id=msg_id)
                return True
            except ContractError as e:
                # A refused or unanswered publish may still have been stored (a stream electing
                # a new leader, its ack lost): running the pass here at once would then run it
                # twice under one lease, two batches, two paid calls (the chaos suite saw it).
                # The same Nats-Msg-Id again is stored at most once (the duplicate window), so
                # ask again until the stream answers; only a stream gone for AI_JOB_QUEUE_S
                # leaves the pass to this replica.
                if self.monotonic() + pause > give_up:
                    log.warning(
                        "poll %s: AI job not queued (%s); running it here", job.evaluation_id, e
                    )
                    return False
                await self.sleep(pause)
                pause = min(2.0, pause * 2)

    async def aclose(self) -> None:
        """Stop hearing the frames (the connection may be draining already)."""
        if self._frames_sub is not None:
            try:
                await self._frames_sub.unsubscribe()
            except Exception as e:
                log.debug("poll frames unsubscribe: %s", e)
