"""HTTP routes of poll (ADR-071, /work/notes/poll-api.md): decode → call the service → encode.

Prefix `/app/api/evaluations/{evaluationId}/poll`. Grants (JWT `grants`), resource
`evaluation:{evaluationId}`:
- staff: role `contributor` or `owner` → the board, the actions, the switches, the wall's frames;
- participant: role `viewer` with the grant fields `attempt` (the attempt id) and `guest`
  (bool); an account's user id is the token's `sub` → the answer, the phones' frames, settings.
Without the grant (or a poll) every route answers 404 `not_found`; a bad token 401.

SSE (`…/stream`, `…/board/stream`): `event: poll.tally` (or `poll.board`), `id: <seq>`,
`data: <JSON>`; a client sending `Last-Event-ID` older than the latest frame is sent it at once
(frames are whole: the latest is the snapshot); a keep-alive comment every 15 s; never buffered
by a proxy (`X-Accel-Buffering: no`). Open streams are capped per participant (the grant's
attempt, else the user) and per token (`POLL_SSE_PER_PARTICIPANT` 4, `POLL_SSE_PER_TOKEN` 8):
one more is 429 `rate_limited`.
"""

import hashlib
from collections.abc import AsyncIterator, Hashable
from typing import Any, Literal

from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import (
    BrainstormAnswer,
    PollIdeaAction,
    PollIdeaBoard,
    PollMyAnswer,
    PollPageSettings,
    PollParticipant,
    PollRevealBody,
    PollSettings,
    PollTallyFrame,
)
from quiz_poll.deps import AnyoneAccess, PollServiceDep, StaffAccess
from quiz_poll.service import PollService
from quiz_servicekit.auth import Access

PREFIX = "/app/api/evaluations/{evaluationId}/poll"
# An action body lists at most 500 keys of at most 200 characters.
ACTION_MAX_BYTES = 256 * 1024
ANSWER_MAX_BYTES = 16 * 1024

_COMMON: dict[int | str, dict[str, Any]] = {
    400: {"description": "invalid_request"},
    401: {"description": "unauthorized"},
    404: {"description": "not_found: no grant on the evaluation, or no brainstorm there"},
}


def participant_of(access: Access) -> PollParticipant:
    """Who answers, from the grant: its `attempt` and `guest` fields (404 without an attempt)."""
    extra = access.grant.model_extra or {}
    attempt = extra.get("attempt")
    if not isinstance(attempt, str) or not attempt.strip():
        raise ContractError(ErrorCode.not_found, "evaluation not found")
    guest = extra.get("guest") is True
    return PollParticipant(
        attempt_id=attempt,
        kind="guest" if guest else "account",
        user_id=None if guest else access.identity.sub,
    )


def _audience(access: Access, audience: str) -> str:
    """`wall` is the teacher's: 404 for a participant (what you may not reach does not exist)."""
    if audience == "wall" and not access.grant.reaches("contributor"):
        raise ContractError(ErrorCode.not_found, "evaluation not found")
    return audience


def stream_holder(access: Access, evaluation_id: str) -> Hashable:
    """Whose stream it is, for the per-participant cap: the grant's attempt, else the user."""
    attempt = (access.grant.model_extra or {}).get("attempt")
    if isinstance(attempt, str) and attempt.strip():
        return (evaluation_id, "attempt", attempt)
    return (evaluation_id, "user", access.identity.sub)


def token_of(request: Request) -> bytes:
    """The bearer token's digest, for the per-token cap (a token may be large; 32 bytes kept)."""
    return hashlib.sha256(request.headers.get("authorization", "").encode()).digest()


SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
    "Connection": "keep-alive",
}


async def _sse(
    service: PollService,
    evaluation_id: str,
    audience: str,
    last_event_id: str | None,
    access: Access,
    request: Request,
) -> StreamingResponse:
    # 429 rate_limited past the caps, before any stream is opened (a JSON error, not SSE).
    ticket = service.stream_quota.acquire(stream_holder(access, evaluation_id), token_of(request))
    try:
        live, sub = await service.stream(evaluation_id, audience, last_event_id)
    except BaseException:
        ticket.release()
        raise

    def close() -> None:
        service.unsubscribe(live, audience, sub)
        ticket.release()

    async def body() -> AsyncIterator[bytes]:
        try:
            while True:
                yield await sub.next()
        finally:
            close()

    # The background task also closes: a client gone before the body started leaves an
    # unstarted generator, whose `finally` never runs (both calls are idempotent).
    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
        background=BackgroundTask(close),
    )


router = APIRouter(prefix=PREFIX, tags=["poll"])


@router.post(
    "/answer",
    response_model=PollMyAnswer,
    max_body_size=ANSWER_MAX_BYTES,
    responses={
        **_COMMON,
        409: {"description": "poll_frozen"},
        422: {"description": "answer_invalid: over maxIdeas, or the poll closed"},
    },
)
async def post_answer(
    evaluationId: str,
    body: BrainstormAnswer,
    *,
    access: AnyoneAccess,
    service: PollServiceDep,
) -> PollMyAnswer:
    """The participant's whole answer (`{ideas}`), sent on every Add and Remove (§8); the
    answer is the stored one, with the ideas waiting for approval (`PollMyAnswer`)."""
    ideas = await service.answer(evaluationId, participant_of(access), body)
    return PollMyAnswer(
        ideas=ideas,
        waiting=await service.waiting(evaluationId, ideas),
        hidden=await service.hidden(evaluationId, ideas),
    )


@router.get("/answer", response_model=PollMyAnswer, responses=_COMMON)
async def get_answer(
    evaluationId: str,
    *,
    access: AnyoneAccess,
    service: PollServiceDep,
) -> PollMyAnswer:
    """My answer as I typed it, with the ideas waiting for approval and those hidden."""
    ideas = await service.my_answer(evaluationId, participant_of(access).attempt_id)
    waiting = await service.waiting(evaluationId, ideas)
    hidden = await service.hidden(evaluationId, ideas)
    return PollMyAnswer.model_construct(ideas=ideas, waiting=waiting, hidden=hidden)


@router.get("/settings", response_model=PollPageSettings, responses=_COMMON)
async def get_settings(
    evaluationId: str,
    *,
    _: AnyoneAccess,
    service: PollServiceDep,
) -> PollPageSettings:
    """The switches (`ai` on: the participants' page shows the AI notice, §4), and the
    question's `prompt` and `maxIdeas` for the pages."""
    return await service.page_settings(evaluationId)


@router.get("/tally", response_model=PollTallyFrame, responses=_COMMON)
async def get_tally(
    evaluationId: str,
    *,
    audience: Literal["wall", "phone"] = Query("phone"),
    access: AnyoneAccess,
    service: PollServiceDep,
) -> PollTallyFrame:
    """The latest frame of the wall (staff) or of the phones."""
    return await service.tally_frame(evaluationId, _audience(access, audience))


@router.get(
    "/stream",
    responses={**_COMMON, 200: {"content": {"text/event-stream": {}}}},
    response_class=StreamingResponse,
)
async def stream(
    evaluationId: str,
    request: Request,
    *,
    audience: Literal["wall", "phone"] = Query("phone"),
    last_event_id: str | None = Header(None, alias="Last-Event-ID"),
    access: AnyoneAccess,
    service: PollServiceDep,
) -> StreamingResponse:
    """SSE of `poll.tally` frames (`id` = seq; Last-Event-ID → the latest frame at once);
    429 `rate_limited` past the open streams allowed per participant or per token."""
    return await _sse(
        service, evaluationId, _audience(access, audience), last_event_id, access, request
    )


@router.get("/ideas", response_model=PollIdeaBoard, responses=_COMMON)
async def get_board(
    evaluationId: str,
    *,
    _: StaffAccess,
    service: PollServiceDep,
) -> PollIdeaBoard:
    """The moderation board: every idea, raw text and correction. Staff only."""
    return await service.board(evaluationId)


@router.post(
    "/ideas",
    response_model=PollIdeaBoard,
    max_body_size=ACTION_MAX_BYTES,
    responses={**_COMMON, 409: {"description": "poll_frozen"}},
)
async def post_action(
    evaluationId: str,
    *,
    change: PollIdeaAction = Body(...),
    access: StaffAccess,
    service: PollServiceDep,
) -> PollIdeaBoard:
    """approve / hide / reset / merge / detach / rename (audited as `poll.ideas`)."""
    return await service.act(evaluationId, access.identity.sub, change)


@router.post(
    "/reveal",
    response_model=PollSettings,
    responses={
        **_COMMON,
        409: {"description": "poll_frozen"},
        422: {"description": "llm_unavailable (AI on), poll_keyless (revealed)"},
    },
)
async def post_reveal(
    evaluationId: str,
    body: PollRevealBody,
    *,
    access: StaffAccess,
    service: PollServiceDep,
) -> PollSettings:
    """The display switches: votes, moderation, AI assistance."""
    return await service.reveal(evaluationId, access.identity.sub, body)


@router.get(
    "/board/stream",
    responses={**_COMMON, 200: {"content": {"text/event-stream": {}}}},
    response_class=StreamingResponse,
)
async def board_stream(
    evaluationId: str,
    request: Request,
    *,
    access: StaffAccess,
    service: PollServiceDep,
) -> StreamingResponse:
    """SSE of `poll.board` snapshots when the board changes. Staff only; 429 as `/stream`."""
    return await _sse(service, evaluationId, "board", None, access, request)
