"""A small in-memory server of the poll API (docs/poll.md, /work/notes/poll-api.md) for the
pages' browser tests while the service's own routes are being built.

It is built from the service's pure core (`BrainstormTally`, `apply_idea_action`, `views`), the
real JWT verification (`quiz_servicekit.auth`) and the real error shapes, with the real page
router (`quiz_poll.pages`). Only the storage (a dict) and the AI (never available: `ai: true`
answers 422 `llm_unavailable`, ADR-072 §3) are simplified. The tests switch to the service itself
once its routes exist (`conftest.poll_service`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import Field, TypeAdapter

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import (
    BrainstormAnswer,
    PollAiState,
    PollIdeaAction,
    PollIdeaBoard,
    PollRevealBody,
    PollSettings,
    PollTallyFrame,
)
from quiz_poll import pages
from quiz_poll.domain.ideas import check_answer
from quiz_poll.domain.marks import apply_idea_action, default_settings
from quiz_poll.domain.tally import BrainstormTally
from quiz_poll.domain.views import apply_switches, board_view, frames, needs_frame, snapshot
from quiz_servicekit.auth import Access, JwtVerifier, require_grant
from quiz_servicekit.http import install_error_handlers

ACTION = TypeAdapter(Annotated[PollIdeaAction, Field(discriminator="action")])


@dataclass
class Poll:
    evaluation_id: str
    settings: PollSettings
    max_ideas: int = 5
    tally: BrainstormTally = field(init=False)
    answers: dict[str, list[str]] = field(default_factory=dict)
    seq: int = 0
    wall: PollTallyFrame | None = None
    phone: PollTallyFrame | None = None
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        self.tally = BrainstormTally(moderation=self.settings.moderation)
        self.publish_now()

    def publish_now(self) -> None:
        t = self.tally
        snap = snapshot(t.joined, t.answered, t.pending, t.cloud())
        self.seq += 1
        self.wall, self.phone = frames(
            self.evaluation_id, self.seq, snap, self.settings, datetime.now(UTC)
        )

    async def publish(self) -> None:
        self.publish_now()
        async with self.changed:
            self.changed.notify_all()

    def board(self) -> PollIdeaBoard:
        ai = PollAiState(available=False, on=self.settings.ai, error=None)
        return board_view(self.tally.board(), self.settings.moderation, ai)


def fixture_app(verifier: JwtVerifier) -> tuple[FastAPI, dict[str, Poll]]:
    """The app and its polls (`polls[evaluation] = Poll(...)` opens one)."""
    app = FastAPI()
    app.state.jwt_verifier = verifier
    install_error_handlers(app)
    app.include_router(pages.router)
    polls: dict[str, Poll] = {}
    base = "/app/api/evaluations/{evaluation}/poll"
    staff = Depends(require_grant("evaluation:{evaluation}", "contributor"))
    anyone = Depends(require_grant("evaluation:{evaluation}", "viewer"))

    def poll_of(evaluation: str) -> Poll:
        poll = polls.get(evaluation)
        if poll is None:
            raise ContractError(ErrorCode.not_found, "poll not found")
        return poll

    def attempt(access: Access) -> str:
        extra = access.grant.model_extra or {}
        return str(extra.get("attempt") or access.identity.sub)

    @app.get(base + "/answer")
    async def get_answer(evaluation: str, access: Access = anyone) -> dict[str, Any]:
        return {"ideas": poll_of(evaluation).answers.get(attempt(access), [])}

    @app.post(base + "/answer")
    async def post_answer(
        evaluation: str, body: BrainstormAnswer, access: Access = anyone
    ) -> dict[str, Any]:
        poll = poll_of(evaluation)
        check_answer(list(body.ideas), poll.max_ideas)
        who = attempt(access)
        poll.answers[who] = list(body.ideas)
        poll.tally.set_answer(who, {"ideas": list(body.ideas)})
        await poll.publish()
        return {"ideas": poll.answers[who]}

    @app.get(base + "/settings")
    async def get_settings(evaluation: str, access: Access = anyone) -> dict[str, Any]:
        poll = poll_of(evaluation)
        return {**poll.settings.model_dump(), "maxIdeas": poll.max_ideas}

    def audience_of(access: Access, audience: str) -> str:
        if audience == "wall" and not access.grant.reaches("contributor"):
            raise ContractError(ErrorCode.not_found, "poll not found")
        return audience

    @app.get(base + "/tally")
    async def get_tally(
        evaluation: str, audience: str = "phone", access: Access = anyone
    ) -> PollTallyFrame:
        poll = poll_of(evaluation)
        frame = poll.wall if audience_of(access, audience) == "wall" else poll.phone
        assert frame is not None
        return frame

    @app.get(base + "/stream")
    async def stream(
        evaluation: str, request: Request, audience: str = "phone", access: Access = anyone
    ) -> StreamingResponse:
        poll = poll_of(evaluation)
        wall = audience_of(access, audience) == "wall"
        last = request.headers.get("last-event-id")

        async def events() -> AsyncIterator[bytes]:
            sent = None if last is None or needs_frame(last, poll.seq) else poll.seq
            while True:
                if sent != poll.seq:
                    frame = poll.wall if wall else poll.phone
                    assert frame is not None
                    sent = frame.seq
                    yield (
                        f"event: poll.tally\nid: {frame.seq}\ndata: {frame.model_dump_json()}\n\n"
                    ).encode()
                    continue
                async with poll.changed:
                    try:
                        await asyncio.wait_for(poll.changed.wait(), 15)
                    except TimeoutError:
                        yield b": keep-alive\n\n"

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    @app.get(base + "/ideas")
    async def get_ideas(evaluation: str, access: Access = staff) -> PollIdeaBoard:
        return poll_of(evaluation).board()

    @app.post(base + "/ideas")
    async def post_ideas(evaluation: str, request: Request, access: Access = staff) -> Any:
        poll = poll_of(evaluation)
        action = ACTION.validate_python(json.loads(await request.body()))
        result = apply_idea_action(poll.tally.marks, action)
        poll.tally.apply_marks(result.marks)
        await poll.publish()
        return poll.board()

    @app.post(base + "/reveal")
    async def reveal(evaluation: str, body: PollRevealBody, access: Access = staff) -> Any:
        poll = poll_of(evaluation)
        change = apply_switches(poll.settings, body, ai_available=False, frozen=False)
        poll.settings = change.settings
        if change.moderation_changed:
            poll.tally.set_moderation(poll.settings.moderation)
        await poll.publish()
        return poll.settings

    return app, polls


def open_poll(polls: dict[str, Poll], evaluation: str, *, anonymous: bool = True) -> Poll:
    """Opens a poll with the ADR's defaults and votes shown (the wall's cloud)."""
    settings = default_settings(anonymous).model_copy(update={"votes": True})
    poll = polls[evaluation] = Poll(evaluation, settings)
    return poll
