"""The poll's use cases: open, close, join, answer, read, moderate, switch, stream, freeze.

Each use case orchestrates its calls in order and nothing else: the poll held in memory
(`cache.PollCache`), the write (`repository`, answers through `answers.AnswerWriter`), the change
applied after its commit (`PollCache.apply`, which makes the frames due: `frames.FrameFanout`),
and for an answer the AI pass requested (`ai_pass.AiPasses`). The rules are the pure `domain/`.
NATS is the edge's (`bus.PollBus`: frames published and heard, AI jobs queued); time is injected
(`clock` epoch s, `monotonic` s, `sleep`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from quiz_contracts.errors import ContractError
from quiz_contracts.poll import (
    BrainstormAnswer,
    BrainstormClose,
    BrainstormOpen,
    ClassroomAudience,
    PollAiJob,
    PollAiState,
    PollIdeaAction,
    PollIdeaBoard,
    PollJoin,
    PollPageSettings,
    PollParticipant,
    PollRevealBody,
    PollSettings,
    PollTallyFrame,
)
from quiz_poll.ai_pass import AiPasses
from quiz_poll.bus import PollBus
from quiz_poll.cache import (
    LivePoll,
    PollCache,
    answer_applier,
    closed_applier,
    freeze_applier,
    join_applier,
    marks_applier,
    switches_applier,
)
from quiz_poll.domain.ai import retroactive_marks
from quiz_poll.domain.freeze import FREEZE_AFTER, freeze, frozen_view
from quiz_poll.domain.ideas import check_answer
from quiz_poll.domain.marks import (
    apply_idea_action,
    default_settings,
    hidden_ideas,
    waiting_ideas,
)
from quiz_poll.domain.views import apply_switches, board_view
from quiz_poll.frames import FrameFanout
from quiz_poll.live import StreamQuota, Subscriber
from quiz_poll.metrics import PollMetrics
from quiz_poll.repository import AnswerToSave, NewPoll, PollRepository
from quiz_servicekit.group_commit import GroupCommit
from quiz_servicekit.llm import LlmClient
from quiz_servicekit.tasks import TaskSet

log = logging.getLogger(__name__)

Clock = Callable[[], float]
# Answers written in one transaction at most (a burst of a lecture hall's phones).
ANSWER_BATCH_MAX = 256


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def answer_writer(
    repo: PollRepository, clock: Clock
) -> GroupCommit[AnswerToSave, int | ContractError]:
    """Answers stored by group commit: those arriving while a transaction runs share the next
    one (one fsync), each resolved with its version or the `ContractError` that refused it; a
    batch whose transaction fails is written again answer by answer, so one bad answer fails
    only its own caller."""
    return GroupCommit(
        "poll-answers", lambda items: repo.save_answers(items, clock()), max_batch=ANSWER_BATCH_MAX
    )


class PollService:
    """Every use case of the poll, for the routes and the NATS endpoints."""

    def __init__(
        self,
        *,
        repo: PollRepository,
        bus: PollBus,
        llm: LlmClient,
        metrics: PollMetrics,
        frame_interval_s: float = 0.25,
        keepalive_s: float = 15.0,
        ai_job_delay_s: float = 3.0,
        ai_deadline_s: float = 60.0,
        availability_ttl_s: float = 5.0,
        sse_per_participant: int = 4,
        sse_per_token: int = 8,
        clock: Clock = time.time,
        monotonic: Clock = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.repo = repo
        self.bus = bus
        self.llm = llm
        self.metrics = metrics
        self.clock = clock
        self.monotonic = monotonic
        self.tasks = TaskSet("poll")
        # Open SSE streams per participant and per token (the routes acquire, 429 past a cap).
        self.stream_quota = StreamQuota(sse_per_participant, sse_per_token)
        self.frames = FrameFanout(
            held=lambda evaluation_id: self.polls.get(evaluation_id),
            board=self.board,
            publish=bus.publish_frame,
            metrics=metrics,
            clock=clock,
            sleep=sleep,
            interval_s=frame_interval_s,
            keepalive_s=keepalive_s,
        )
        self.polls = PollCache(
            repo, metrics, changed=self.frames.touch, spawn=self.tasks.spawn, monotonic=monotonic
        )
        self.answers = answer_writer(repo, clock)
        self.ai = AiPasses(
            polls=self.polls,
            repo=repo,
            llm=llm,
            metrics=metrics,
            queue_job=bus.queue_ai_job,
            touch=self.frames.touch,
            spawn=self.tasks.spawn,
            clock=clock,
            sleep=sleep,
            monotonic=monotonic,
            job_delay_s=ai_job_delay_s,
            deadline_s=ai_deadline_s,
            availability_ttl_s=availability_ttl_s,
        )

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """The keep-alives of the SSE clients."""
        self.tasks.spawn(self.frames.keepalives(lambda: self.polls), name="poll-keepalives")

    def remote_frame(self, evaluation_id: str, seq: int) -> None:
        """A frame heard on `poll.v1.*.tally` (any replica's): another replica's change of a
        poll held here reads it again."""
        self.polls.remote_frame(evaluation_id, seq)

    async def aclose(self) -> None:
        await self.frames.aclose()
        await self.answers.close()
        await self.tasks.close()

    def evict_idle(self, idle_s: float) -> int:
        """Forget the polls nobody used for `idle_s` seconds (no stream open, no pass, no write
        in progress): the next request reads them again from the database."""
        gone = self.polls.evict_idle(idle_s, self.ai.busy)
        for evaluation_id in gone:
            self.ai.forget(evaluation_id)
        return len(gone)

    # --- the platform's edge (NATS) ------------------------------------------------------------

    async def open(self, request: BrainstormOpen) -> LivePoll:
        """Open a brainstorm (or run one again: a new evaluation, no mark, AI off)."""
        anonymous = not isinstance(request.audience, ClassroomAudience)
        classroom = request.audience.classroom_id if not anonymous else None  # type: ignore[union-attr]
        await self.repo.open(
            NewPoll(
                evaluation_id=request.evaluation_id,
                again_of=request.again_of,
                teacher_id=request.teacher_id,
                anonymous=anonymous,
                classroom_id=classroom,
                prompt=request.question.prompt,
                max_ideas=request.question.max_ideas,
                roster=request.roster,
                moderation=default_settings(anonymous).moderation,
            ),
            request.opened_at.timestamp(),
        )
        return await self.polls.live(request.evaluation_id)

    async def close(self, request: BrainstormClose) -> LivePoll:
        """The End: no answer after it; the poll freezes 30 days later."""
        await self.polls.live(request.evaluation_id)
        row = await self.repo.close(request.evaluation_id, request.closed_at.timestamp())
        return self.polls.apply(request.evaluation_id, row.version, closed_applier(row.closed_at))

    async def join(self, request: PollJoin) -> LivePoll:
        """A participant joined: counts in `joined`; an account's name joins the masking list."""
        await self.polls.live(request.evaluation_id)
        version = await self.repo.join(
            request.evaluation_id, request.participant, request.person, self.clock()
        )
        person = request.person if request.participant.kind == "account" else None
        joined = join_applier(request.model_copy(update={"person": person}))
        if version is None:  # known already (its person may be new): nothing the room sees
            joined(self.polls[request.evaluation_id])
            return self.polls[request.evaluation_id]
        return self.polls.apply(request.evaluation_id, version, joined)

    # --- participants ----------------------------------------------------------------------

    async def answer(
        self, evaluation_id: str, participant: PollParticipant, body: BrainstormAnswer
    ) -> list[str]:
        """Store a participant's whole answer; the tally, frames and the AI follow."""
        live = await self.polls.live(evaluation_id)
        ideas = list(body.ideas)
        try:
            check_answer(ideas, live.row.max_ideas)
            saved = await self.answers.submit(AnswerToSave(evaluation_id, participant, ideas))
            if isinstance(saved, ContractError):
                raise saved
            version = saved
        except ContractError as e:
            self.metrics.answers.labels(e.code.value).inc()
            raise
        self.metrics.answers.labels("ok").inc()
        answered = answer_applier(evaluation_id, participant, ideas, version)
        live = self.polls.apply(evaluation_id, version, answered)
        if live.row.ai:
            self.tasks.spawn(self.ai.request(evaluation_id), name=f"poll-ai-claim:{evaluation_id}")
        return ideas

    async def my_answer(self, evaluation_id: str, attempt_id: str) -> list[str]:
        await self.polls.live(evaluation_id)
        return await self.repo.answer(evaluation_id, attempt_id)

    async def waiting(self, evaluation_id: str, ideas: list[str]) -> list[str]:
        """Those of `ideas` that wait for the teacher's approval (`waiting_ideas`)."""
        live = await self.polls.live(evaluation_id)
        return waiting_ideas(ideas, live.tally.marks, live.row.moderation)

    async def hidden(self, evaluation_id: str, ideas: list[str]) -> list[str]:
        """Those of `ideas` the teacher or the model hid (`hidden_ideas`; issue 34)."""
        live = await self.polls.live(evaluation_id)
        return hidden_ideas(ideas, live.tally.marks)

    # --- reading -------------------------------------------------------------------------------

    async def settings(self, evaluation_id: str) -> PollSettings:
        return (await self.polls.live(evaluation_id)).settings

    async def page_settings(self, evaluation_id: str) -> PollPageSettings:
        """The switches and the question, for the pages (`GET …/poll/settings`)."""
        live = await self.polls.live(evaluation_id)
        sight = await self.ai.sight()
        return PollPageSettings(
            **live.settings.model_dump(by_alias=False),
            prompt=live.row.prompt,
            max_ideas=live.row.max_ideas,
            ai_model=sight.model,
            ai_provider=sight.provider,
            demo=sight.demo,
        )

    async def tally_frame(self, evaluation_id: str, audience: str) -> PollTallyFrame:
        """The latest frame of `audience` (whole: it is the snapshot)."""
        wall, phone = self.frames.frames(await self.polls.live(evaluation_id))
        return wall if audience == "wall" else phone

    async def board(self, evaluation_id: str) -> PollIdeaBoard:
        """The staff board: every idea, hidden and unmoderated included."""
        live = await self.polls.live(evaluation_id)
        if live.frozen_board is not None:
            return live.frozen_board
        ai = await self.ai.state(live)
        return board_view(live.tally.board(), live.row.moderation, ai)

    async def ai_available(self) -> bool:
        """Whether the gateway can call a model for purpose poll (cached a few seconds)."""
        return await self.ai.available()

    # --- the teacher ---------------------------------------------------------------------------

    async def act(self, evaluation_id: str, actor: str, change: PollIdeaAction) -> PollIdeaBoard:
        """A teacher's action on the board (audited as `poll.ideas`); 409 once frozen."""
        live = await self.polls.live(evaluation_id)
        live.ensure_moderation_open(self.clock())
        async with live.lock:
            live = self.polls[evaluation_id]  # a reload may have replaced it meanwhile
            result = apply_idea_action(live.tally.marks, change, live.tally.spellings)
            audit = result.audit
            version = await self.repo.write_marks(
                evaluation_id, result.marks, actor, audit.action_name, audit.record(), self.clock()
            )
            self.polls.apply(evaluation_id, version, marks_applier(result.marks))
        return await self.board(evaluation_id)

    async def reveal(self, evaluation_id: str, actor: str, body: PollRevealBody) -> PollSettings:
        """The switches (votes, moderation, AI); audited as `poll.reveal`."""
        live = await self.polls.live(evaluation_id)
        turning_ai_on = bool(body.ai) and not live.row.ai
        sight = await self.ai.sight() if turning_ai_on else None
        async with live.lock:
            live = self.polls[evaluation_id]
            change = apply_switches(
                live.settings,
                body,
                ai_available=sight is None or sight.available,
                frozen=live.frozen_now(self.clock()),
                unavailable_reason=sight.reason if sight is not None else None,
            )
            s = change.settings
            retro = (
                retroactive_marks(live.tally.keys(), live.tally.marks)
                if change.ai_turned_on
                else []
            )
            run = "on" if change.ai_turned_on else "off" if change.ai_turned_off else None
            written, version = await self.repo.set_switches(
                evaluation_id,
                votes=s.votes,
                moderation=s.moderation,
                ai=s.ai,
                retroactive=retro,
                run=run,
                actor=actor,
                record={"body": body.model_dump(exclude_none=True), "settings": s.model_dump()},
                now=self.clock(),
            )
            live = self.polls.apply(evaluation_id, version, switches_applier(s, written))
            if change.ai_turned_on:
                self.ai.switched_on(evaluation_id)
        return live.settings

    # --- live frames ---------------------------------------------------------------------------

    async def stream(
        self, evaluation_id: str, audience: str, last_event_id: str | None
    ) -> tuple[LivePoll, Subscriber]:
        """Subscribe to a poll's frames; a (re)connecting client is sent the latest one at once."""
        live = await self.polls.live(evaluation_id)
        return live, await self.frames.subscribe(live, audience, last_event_id)

    def unsubscribe(self, live: LivePoll, audience: str, sub: Subscriber) -> None:
        """Stop sending to `sub`; a second call for the same subscriber does nothing."""
        self.frames.unsubscribe(live, audience, sub)

    # --- AI ------------------------------------------------------------------------------------

    async def run_ai_job(self, job: PollAiJob, *, retry: bool = False) -> None:
        """The `poll.v1.ai.jobs` job (`AiPasses.run_job`)."""
        await self.ai.run_job(job, retry=retry)

    # --- the freeze ----------------------------------------------------------------------------

    async def freeze_due(self) -> int:
        """Freeze every poll closed 30 days ago: keep its board and tally, purge its guests."""
        now = self.clock()
        done = 0
        for evaluation_id in await self.repo.due_freeze(now - FREEZE_AFTER.total_seconds()):
            live = await self.polls.live(evaluation_id)
            async with live.lock:
                live = self.polls[evaluation_id]
                frozen = freeze(live.tally, _dt(now))
                board = board_view(
                    frozen.board,
                    frozen.moderation,
                    PollAiState(available=False, on=live.row.ai, error=None),
                )
                version = await self.repo.freeze(evaluation_id, frozen_view(frozen, board), now)
                if version:
                    self.polls.apply(evaluation_id, version, freeze_applier(frozen, board, now))
                    done += 1
        return done
