"""The AI batch's request id: same pass and batch, same id; anything else, another."""

from __future__ import annotations

from quiz_contracts.llm import CompleteRequest, LlmMessage, Purpose
from quiz_poll.domain.ai_ids import batch_request_id


def batch(
    text: str, *, request_id: str | None = None, deadline_s: float | None = None
) -> CompleteRequest:
    return CompleteRequest(
        purpose=Purpose.poll,
        user=None,
        billed_to="teacher-1",
        messages=[LlmMessage(role="user", content=text)],
        request_id=request_id,
        deadline_s=deadline_s,
    )


def test_a_redelivered_job_sends_the_same_id() -> None:
    first = batch_request_id("ev-1", 1767225600.25, batch("ideas 1-50"))
    again = batch_request_id("ev-1", 1767225600.25, batch("ideas 1-50", deadline_s=60))
    assert first == again and first.startswith("poll:ev-1:1767225600.25:")
    # The id a first send carried does not change the id of the content.
    assert batch_request_id("ev-1", 1767225600.25, batch("ideas 1-50", request_id=first)) == first


def test_another_batch_pass_or_poll_is_another_call() -> None:
    base = batch_request_id("ev-1", 1.5, batch("ideas 1-50"))
    assert base != batch_request_id("ev-1", 1.5, batch("ideas 1-51"))
    assert base != batch_request_id("ev-1", 2.5, batch("ideas 1-50"))
    assert base != batch_request_id("ev-2", 1.5, batch("ideas 1-50"))


def test_the_id_fits_the_contract() -> None:
    assert len(batch_request_id("e" * 300, 1.5, batch("x"))) <= 200


def test_the_batch_kept_while_its_call_is_out_reads_back_as_it_was_sent() -> None:
    """A pass run again sends the very request it kept (issue 20): same ideas, same id."""
    from quiz_poll.domain.ai import Batch, BatchIdea, build_call, complete_request
    from quiz_poll.domain.ai_ids import batch_request_id, pending_record, read_pending
    from quiz_poll.domain.masking import name_mask

    batch = Batch(fresh=(BatchIdea("velo", "vélo"),), context=(BatchIdea("bus", "Bus"),))
    request = complete_request(build_call("Comment venir ?", batch, name_mask([])), "t-1", "")
    request = request.model_copy(update={"request_id": batch_request_id("ev1", 1.5, request)})
    kept = read_pending(pending_record(batch, request))
    assert kept == (batch, request)
    assert read_pending(None) is None
    assert read_pending("{not json") is None
    assert read_pending('{"fresh": 1}') is None
