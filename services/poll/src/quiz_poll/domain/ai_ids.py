"""The request id of an AI batch call, derived from its work (issue 20, item 3).

`poll:<evaluation_id>:<lease>:<digest of the call>` — the poll, the pass (its lease: the claim
time the `poll.v1.ai.jobs` job carries) and the batch (SHA-256 of the `llm.v1.complete`
request without its request id and deadline: the ideas sent, their context, the prompt).

- A job redelivered after its replica died mid-call runs again under the same lease, chooses the
  same batch from the same ideas, and so sends the same id: the gateway answers it from the
  call the dead replica made and paid (or joins it while in hand) — one paid call per batch.
- A batch that differs (ideas typed meanwhile, a mark the teacher changed) is another question:
  another id, its own call; it can never meet the gateway's `invalid_request` for an id reused
  with another request.
- A pass run again under the same lease (its job delivered again) first sends the batch the
  run kept while its call was out (`pending_record`, `poll_ai_runs.pending`), request id and
  all: chosen afresh it would hold the ideas typed meanwhile too, another id, and the first
  ideas would be paid twice.
- A later pass (a new lease) asks afresh: an idea the model left out is judged again, not
  answered from the earlier reply.
"""

from __future__ import annotations

import json

from quiz_contracts.llm import CompleteRequest
from quiz_poll.domain.ai import Batch, BatchIdea
from quiz_servicekit.request_ids import bounded_id, digest


def batch_request_id(evaluation_id: str, lease: float, call: CompleteRequest) -> str:
    """The id of `call`, the batch the pass holding `lease` sends for `evaluation_id`."""
    content = call.model_copy(update={"request_id": None, "deadline_s": None})
    return bounded_id("poll", evaluation_id, repr(lease), digest(content))


def pending_record(batch: Batch, request: CompleteRequest) -> str:
    """What the AI run keeps of a batch while its call is out (`poll_ai_runs.pending`): its
    ideas, its context and the request with its id, as JSON."""
    return json.dumps(
        {
            "fresh": [[idea.key, idea.text] for idea in batch.fresh],
            "context": [[idea.key, idea.text] for idea in batch.context],
            "request": request.model_dump(mode="json"),
        },
        ensure_ascii=False,
    )


def read_pending(text: str | None) -> tuple[Batch, CompleteRequest] | None:
    """The batch and request a `pending_record` kept; None when there is none or it does not
    read (a pass then chooses its batch afresh)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        batch = Batch(
            fresh=tuple(BatchIdea(str(k), str(t)) for k, t in data["fresh"]),
            context=tuple(BatchIdea(str(k), str(t)) for k, t in data["context"]),
        )
        return batch, CompleteRequest.model_validate(data["request"])
    except (ValueError, KeyError, TypeError):
        return None
