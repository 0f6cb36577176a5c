"""JetStream work of poll: the AI pass job (`poll.v1.ai.jobs` on stream POLL_AI).

An answer that claims a poll's lease publishes one job due 3 s later (ADR-072 §12); any replica
runs it. The pass may take minutes (batch after batch), so the consumer acks progress while it
works and has no time bound; if the replica dies mid-pass the job is delivered again and the
pass goes on under the same lease (a lease another pass took meanwhile stops it).
"""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects, topology
from quiz_contracts.poll import PollAiJob
from quiz_poll.service import PollService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.jetstream import ConsumerSpec, Delivery

# POLL_AI (the pass jobs, a work queue: each job to one replica, gone once acked) and the
# consumer poll-ai are provisioned by operations (quiz_contracts.topology, issue 29).
AI_JOB_MAX_AGE_S = topology.stream(subjects.POLL_AI_STREAM).max_age_s


def consumers(service: ServiceRef[PollService]) -> list[ConsumerSpec[Any]]:
    """The AI pass worker."""

    async def run(job: PollAiJob, delivery: Delivery) -> None:
        # A batch the gateway did not answer is retried by redelivery (same lease, same
        # request id), until the last delivery, which shows llm_failed on the board.
        # A job whose pass runs already (a redelivery, a job stored twice) waits its turn.
        await service().run_ai_job(job, retry=not delivery.last_attempt)

    return [
        ConsumerSpec(
            "poll-ai",
            subjects.POLL_AI_STREAM,
            PollAiJob,
            run,
            ack_wait_s=30.0,
            max_deliver=10,
            max_in_flight=16,
            nak_delays_s=(1.0, 5.0, 30.0),
            timeout_s=None,
            description="poll: runs the AI pass of a poll",
        )
    ]
