"""The poll service: a live poll per evaluation, held in memory, written through to the database.

One `LivePoll` per evaluation a replica serves: the stored row, the incremental tally
(`domain.tally`), the answers (participants' order), the marks, who joined, and the SSE
subscribers. Every write goes to the database first (one transaction, which bumps the poll's
`version`), then to the tally; a coalesced flush then builds the wall's and the phones' frames
once (`seq` = the version), hands them to every subscriber's one-frame slot and publishes them on
NATS `poll.v1.<evaluation>.tally`.

Replicas: each replica also listens to `poll.v1.*.tally`. A frame of a poll it holds, with a
`seq` above its own version, was made by another replica: it re-reads that poll from the
database (coalesced: one read in flight per poll) and sends its own clients the new frames.

AI (ADR-072 §12–§14, FACTS D "Batches"): an answer claims the lease of `poll_ai_runs` (a
conditional UPDATE: one pass per poll across replicas) and publishes one `poll.v1.ai.jobs` job
due `ai_job_delay_s` (3 s) later on a JetStream work queue; the replica that takes the job runs
the pass: up to 50 new ideas per call with the wall's ideas as context until none is left, then
it releases the lease. A replica that dies mid-pass leaves its job unacked: it is delivered again
and the pass goes on under the same lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from quiz_contracts import subjects
from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteRequest, Purpose
from quiz_contracts.poll import (
    BrainstormAnswer,
    BrainstormClose,
    BrainstormOpen,
    ClassroomAudience,
    IdeaMark,
    MaskedPerson,
    PollAiError,
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
from quiz_poll.domain.ai import (
    Batch,
    apply_ai_verdicts,
    build_call,
    complete_request,
    marks_to_write,
    read_verdicts,
    retroactive_marks,
    select_batch,
)
from quiz_poll.domain.ai_ids import batch_request_id, pending_record, read_pending
from quiz_poll.domain.ai_run import (
    ERROR_COOLDOWN,
    PASS_ALIVE,
    PASS_BEAT,
    RUN_CAP,
    board_error,
    pass_running,
)
from quiz_poll.domain.board import Bubble
from quiz_poll.domain.freeze import FREEZE_AFTER
from quiz_poll.domain.ideas import check_answer
from quiz_poll.domain.marks import apply_idea_action, default_settings, waiting_ideas
from quiz_poll.domain.masking import name_mask, people_to_mask
from quiz_poll.domain.tally import BrainstormTally, tally_from_answers
from quiz_poll.domain.views import (
    TallySnapshot,
    apply_switches,
    board_view,
    frames,
    needs_frame,
    snapshot,
)
from quiz_poll.live import Coalescer, StreamQuota, Subscriber, sse_event
from quiz_poll.metrics import PollMetrics
from quiz_poll.repository import (
    AiRunRow,
    AnswerToSave,
    NewPoll,
    PollRepository,
    PollRow,
    PollState,
)
from quiz_servicekit.jetstream import publish
from quiz_servicekit.llm import LlmClient, LlmNotAnswered

log = logging.getLogger(__name__)

Clock = Callable[[], float]
# Answers written in one transaction at most (a burst of a lecture hall's phones).
ANSWER_BATCH_MAX = 256
# How long an AI pass job is offered to its stream (same Nats-Msg-Id) before the pass runs on
# this replica: longer than a replicated stream takes to elect a new leader (a few seconds).
AI_JOB_QUEUE_S = 20.0
AUDIENCES = ("wall", "phone", "board")


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@dataclass
class LivePoll:
    """One poll as a replica holds it (see the module docstring)."""

    row: PollRow
    tally: BrainstormTally
    answers: dict[str, object]
    joined: dict[str, PollJoin]
    version: int
    # The database version this object was read at: a change at or below it is in it already.
    loaded_version: int = 0
    # Versions this replica applied itself since (a remote frame of another one means a reload).
    local: set[int] = field(default_factory=set)
    # While a reload reads the database, local changes are also journaled, to be replayed on
    # the object the reload builds (those committed after its read).
    reloading: bool = False
    reload_again: bool = False
    journal: list[tuple[int, Callable[[LivePoll], None]]] = field(default_factory=list)
    answer_versions: dict[str, int] = field(default_factory=dict)
    frozen: TallySnapshot | None = None
    frozen_board: PollIdeaBoard | None = None
    subscribers: dict[str, set[Subscriber]] = field(
        default_factory=lambda: {a: set() for a in AUDIENCES}
    )
    latest: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    publish_pending: bool = False
    used_at: float = field(default_factory=time.monotonic)  # last read by a request or a job

    @property
    def settings(self) -> PollSettings:
        return PollSettings(
            anonymous=self.row.anonymous,
            votes=self.row.votes,
            moderation=self.row.moderation,
            ai=self.row.ai,
        )

    def snapshot(self) -> TallySnapshot:
        if self.frozen is not None:
            return self.frozen
        t = self.tally
        return snapshot(t.joined, t.answered, t.pending, t.cloud())


def _state_to_live(state: PollState) -> LivePoll:
    row = state.poll
    joined = {
        j.participant.attempt_id: PollJoin(
            evaluation_id=row.evaluation_id, participant=j.participant, person=j.person
        )
        for j in state.joined
    }
    tally = tally_from_answers(state.answers, state.marks, row.moderation)
    for attempt in joined:
        tally.join(attempt)
    live = LivePoll(
        row=row,
        tally=tally,
        answers=dict(state.answers),
        joined=joined,
        version=row.version,
        loaded_version=row.version,
    )
    if row.frozen_view is not None:
        view = row.frozen_view
        tv = view["tally"]
        live.frozen = snapshot(
            tv["joined"],
            tv["answered"],
            tv["pending"],
            [Bubble(b["key"], b["label"], b["count"]) for b in tv["cloud"]],
        )
        live.frozen_board = PollIdeaBoard.model_validate(view["board"])
    return live


class PollService:
    """Every use case of the poll, for the routes and the NATS endpoints."""

    def __init__(
        self,
        *,
        repo: PollRepository,
        nc: NATS,
        js: JetStreamContext | None = None,
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
    ) -> None:
        self.repo = repo
        self.nc = nc
        self.js = js
        self.llm = llm
        self.metrics = metrics
        self.keepalive_s = keepalive_s
        self.ai_job_delay_s = ai_job_delay_s
        self.ai_deadline_s = ai_deadline_s
        self.availability_ttl_s = availability_ttl_s
        self.clock = clock
        self._polls: dict[str, LivePoll] = {}
        # Open SSE streams per participant and per token (the routes acquire, 429 past a cap).
        self.stream_quota = StreamQuota(sse_per_participant, sse_per_token)
        self._loading: dict[str, asyncio.Future[LivePoll | None]] = {}
        self._reloading: set[str] = set()
        self._coalescer = Coalescer(self._flush, frame_interval_s)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._availability: tuple[float, bool] | None = None
        self._frames_sub: Subscription | None = None
        # Group commit of answers: those arriving while a transaction runs share the next one.
        self._answer_queue: list[tuple[AnswerToSave, asyncio.Future[int]]] = []
        self._answer_writer: asyncio.Task[None] | None = None
        # AI passes this replica runs, and its failures' cool-downs: an answer then skips the
        # claim (a write) that could not succeed. Other replicas' passes are the row's to tell.
        self._passes: dict[str, float] = {}  # evaluation -> the lease of our pass
        self._claimed: dict[str, float] = {}  # evaluation -> when the job claimed here starts
        self._cooling: dict[str, float] = {}

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen to every poll's frames: another replica's change of a poll held here."""
        self._frames_sub = await self.nc.subscribe(
            subjects.poll_tally_filter(), cb=self._on_remote_frame
        )
        self._spawn(self._keepalives())

    async def _keepalives(self) -> None:
        """Every `keepalive_s`, a keep-alive comment to each idle SSE client (proxies close
        idle streams), all clients at once rather than a timer per client."""
        while True:
            await asyncio.sleep(self.keepalive_s)
            for live in list(self._polls.values()):
                for subscribers in live.subscribers.values():
                    for sub in subscribers:
                        sub.poke()

    async def aclose(self) -> None:
        if self._frames_sub is not None:
            try:
                await self._frames_sub.unsubscribe()
            except Exception as e:  # the connection may be draining already
                log.debug("poll frames unsubscribe: %s", e)
        await self._coalescer.aclose()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("poll background task failed", exc_info=task.exception())

    # --- loading -------------------------------------------------------------------------------

    async def live(self, evaluation_id: str) -> LivePoll:
        """The poll held in memory (read once from the database); 404 when there is none."""
        live = self._polls.get(evaluation_id)
        if live is not None:
            live.used_at = time.monotonic()
            return live
        pending = self._loading.get(evaluation_id)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[evaluation_id] = pending
            try:
                state = await self.repo.state(evaluation_id)
                loaded = None if state is None else _state_to_live(state)
                if loaded is not None:
                    self._polls[evaluation_id] = loaded
                pending.set_result(loaded)
            except BaseException as e:
                pending.set_exception(e)
                raise
            finally:
                self._loading.pop(evaluation_id, None)
        result = await asyncio.shield(pending)
        if result is None:
            raise ContractError(ErrorCode.not_found, "poll not found")
        return result

    async def _reload(self, evaluation_id: str) -> None:
        """Re-read a poll another replica changed, keeping this replica's subscribers.

        Local changes committed while the read runs are journaled and replayed on the new
        object when the read did not see them; a remote change noticed meanwhile reads again.
        """
        old = self._polls.get(evaluation_id)
        if old is None:
            return
        if old.reloading:
            old.reload_again = True
            return
        old.reloading, old.reload_again, old.journal = True, False, []
        try:
            state = await self.repo.state(evaluation_id)
        except BaseException:
            old.reloading = False
            raise
        old.reloading = False
        if state is None:
            return
        new = _state_to_live(state)
        for version, change in old.journal:
            if version > new.loaded_version:
                change(new)
                new.local.add(version)
        old.journal = []
        new.version = max(new.version, old.version)
        new.subscribers, new.latest, new.lock = old.subscribers, old.latest, old.lock
        self._polls[evaluation_id] = new
        self.metrics.reloads.inc()
        self._coalescer.touch(evaluation_id)
        if old.reload_again:
            self._spawn(self._reload(evaluation_id))

    async def _on_remote_frame(self, msg: Msg) -> None:
        try:
            frame = json.loads(msg.data)
            evaluation_id, seq = str(frame["evaluationId"]), int(frame["seq"])
        except (ValueError, KeyError, TypeError):
            return
        live = self._polls.get(evaluation_id)
        if live is not None and seq > live.loaded_version and seq not in live.local:
            self._spawn(self._reload(evaluation_id))

    def _apply(
        self, evaluation_id: str, version: int | None, change: Callable[[LivePoll], None]
    ) -> LivePoll:
        """Apply a committed local change to the poll held now (unless its read holds it
        already), and make frames due (published on NATS). Never awaits: atomic on the loop."""
        live = self._polls[evaluation_id]
        if version is None:
            change(live)
        elif version > live.loaded_version:
            change(live)
            live.local.add(version)
            if live.reloading:
                live.journal.append((version, change))
            live.version = max(live.version, version)
        live.publish_pending = True
        self._coalescer.touch(evaluation_id)
        return live

    def evict_idle(self, idle_s: float) -> int:
        """Forget the polls nobody used for `idle_s` seconds (no stream open, no pass, no write
        in progress): the next request reads them again from the database."""
        now = time.monotonic()
        idle = [
            evaluation_id
            for evaluation_id, live in self._polls.items()
            if now - live.used_at > idle_s
            and not any(live.subscribers.values())
            and not live.lock.locked()
            and not live.reloading
            and evaluation_id not in self._passes
            and self.clock() >= self._claimed.get(evaluation_id, 0.0)
        ]
        for evaluation_id in idle:
            del self._polls[evaluation_id]
            self._claimed.pop(evaluation_id, None)
            self._cooling.pop(evaluation_id, None)
        return len(idle)

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
        return await self.live(request.evaluation_id)

    async def close(self, request: BrainstormClose) -> LivePoll:
        """The End: no answer after it; the poll freezes 30 days later."""
        await self.live(request.evaluation_id)
        row = await self.repo.close(request.evaluation_id, request.closed_at.timestamp())

        def closed(live: LivePoll) -> None:
            live.row = _replace_row(live.row, closed_at=row.closed_at)

        return self._apply(request.evaluation_id, row.version, closed)

    async def join(self, request: PollJoin) -> LivePoll:
        """A participant joined: counts in `joined`; an account's name joins the masking list."""
        await self.live(request.evaluation_id)
        version = await self.repo.join(
            request.evaluation_id, request.participant, request.person, self.clock()
        )
        attempt = request.participant.attempt_id
        person = request.person if request.participant.kind == "account" else None
        join = request.model_copy(update={"person": person})

        def joined(live: LivePoll) -> None:
            live.joined[attempt] = join
            live.tally.join(attempt)

        if version is None:  # known already (its person may be new): nothing the room sees
            joined(self._polls[request.evaluation_id])
            return self._polls[request.evaluation_id]
        return self._apply(request.evaluation_id, version, joined)

    # --- participants ----------------------------------------------------------------------

    async def answer(
        self, evaluation_id: str, participant: PollParticipant, body: BrainstormAnswer
    ) -> list[str]:
        """Store a participant's whole answer; the tally, frames and the AI follow."""
        live = await self.live(evaluation_id)
        ideas = list(body.ideas)
        try:
            check_answer(ideas, live.row.max_ideas)
            version = await self._save_answer(AnswerToSave(evaluation_id, participant, ideas))
        except ContractError as e:
            self.metrics.answers.labels(e.code.value).inc()
            raise
        self.metrics.answers.labels("ok").inc()
        attempt = participant.attempt_id
        payload = {"ideas": ideas}

        def answered(live: LivePoll) -> None:
            # Two answers of one phone may commit in one order and resume in the other: the
            # tally keeps the one of the higher version.
            if live.answer_versions.get(attempt, 0) < version:
                live.answer_versions[attempt] = version
                live.answers[attempt] = payload
                live.tally.set_answer(attempt, payload)
                if attempt not in live.joined:
                    live.joined[attempt] = PollJoin(
                        evaluation_id=evaluation_id, participant=participant
                    )

        live = self._apply(evaluation_id, version, answered)
        if live.row.ai:
            self._spawn(self.request_ai_pass(evaluation_id))
        return ideas

    async def _save_answer(self, item: AnswerToSave) -> int:
        """Store one answer through the group commit; its version, or its ContractError.

        One writer at a time: a phone's answer waits at most for the transaction in progress,
        and then goes with every answer that arrived meanwhile (one transaction, one fsync),
        instead of 8 threads queueing on SQLite's writer lock one answer each.
        """
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._answer_queue.append((item, future))
        if self._answer_writer is None or self._answer_writer.done():
            self._answer_writer = asyncio.get_running_loop().create_task(self._write_answers())
        return await future

    async def _write_answers(self) -> None:
        while self._answer_queue:
            batch, self._answer_queue = (
                self._answer_queue[:ANSWER_BATCH_MAX],
                self._answer_queue[ANSWER_BATCH_MAX:],
            )
            try:
                results = await self.repo.save_answers([item for item, _ in batch], self.clock())
            except BaseException as e:  # the whole transaction failed: each caller hears why
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                if isinstance(e, asyncio.CancelledError):
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, ContractError):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    async def my_answer(self, evaluation_id: str, attempt_id: str) -> list[str]:
        await self.live(evaluation_id)
        return await self.repo.answer(evaluation_id, attempt_id)

    async def waiting(self, evaluation_id: str, ideas: list[str]) -> list[str]:
        """Those of `ideas` that wait for the teacher's approval (`waiting_ideas`)."""
        live = await self.live(evaluation_id)
        return waiting_ideas(ideas, live.tally.marks, live.row.moderation)

    # --- reading -------------------------------------------------------------------------------

    async def settings(self, evaluation_id: str) -> PollSettings:
        return (await self.live(evaluation_id)).settings

    async def page_settings(self, evaluation_id: str) -> PollPageSettings:
        """The switches and the question, for the pages (`GET …/poll/settings`)."""
        live = await self.live(evaluation_id)
        return PollPageSettings(
            **live.settings.model_dump(by_alias=False),
            prompt=live.row.prompt,
            max_ideas=live.row.max_ideas,
        )

    def _frames(self, live: LivePoll) -> tuple[PollTallyFrame, PollTallyFrame]:
        return frames(
            live.row.evaluation_id,
            max(live.version, 1),
            live.snapshot(),
            live.settings,
            _dt(self.clock()),
        )

    async def tally_frame(self, evaluation_id: str, audience: str) -> PollTallyFrame:
        """The latest frame of `audience` (whole: it is the snapshot)."""
        live = await self.live(evaluation_id)
        wall, phone = self._frames(live)
        return wall if audience == "wall" else phone

    async def _ai_state(self, live: LivePoll) -> PollAiState:
        run = await self.repo.ai_run(live.row.evaluation_id)
        error = run.error if run is not None else None
        return PollAiState(
            available=await self.ai_available(),
            on=live.row.ai,
            error=error,
            calls=run.calls if run is not None else 0,
            run_cap=RUN_CAP,
        )

    async def board(self, evaluation_id: str) -> PollIdeaBoard:
        """The staff board: every idea, hidden and unmoderated included."""
        live = await self.live(evaluation_id)
        if live.frozen_board is not None:
            return live.frozen_board
        return board_view(live.tally.board(), live.row.moderation, await self._ai_state(live))

    async def ai_available(self) -> bool:
        """Whether the gateway can call a model for purpose poll (cached a few seconds)."""
        now = time.monotonic()
        if self._availability is not None and now - self._availability[0] < self.availability_ttl_s:
            return self._availability[1]
        try:
            reply = await self.llm.availability(Purpose.poll)
            available = reply.available
        except ContractError:
            available = False
        self._availability = (now, available)
        return available

    # --- the teacher ---------------------------------------------------------------------------

    def _frozen_now(self, live: LivePoll) -> bool:
        closed = live.row.closed_at
        return live.row.frozen_at is not None or (
            closed is not None and self.clock() >= closed + FREEZE_AFTER.total_seconds()
        )

    async def act(self, evaluation_id: str, actor: str, change: PollIdeaAction) -> PollIdeaBoard:
        """A teacher's action on the board (audited as `poll.ideas`)."""
        live = await self.live(evaluation_id)
        if self._frozen_now(live):
            raise ContractError(
                ErrorCode.poll_frozen,
                "This poll closed over 30 days ago: its moderation is read-only.",
            )
        async with live.lock:
            live = self._polls[evaluation_id]  # a reload may have replaced it meanwhile
            result = apply_idea_action(live.tally.marks, change, live.tally.spellings)
            record = {
                "change": result.audit.change,
                "before": {
                    k: None if m is None else m.model_dump() for k, m in result.audit.before.items()
                },
                "after": {k: m.model_dump() for k, m in result.audit.after.items()},
            }
            version = await self.repo.write_marks(
                evaluation_id,
                result.marks,
                actor,
                result.audit.action_name,
                record,
                self.clock(),
            )
            self._apply(evaluation_id, version, _marks_applier(result.marks))
        return await self.board(evaluation_id)

    async def reveal(self, evaluation_id: str, actor: str, body: PollRevealBody) -> PollSettings:
        """The switches (votes, moderation, AI); audited as `poll.reveal`."""
        live = await self.live(evaluation_id)
        turning_ai_on = bool(body.ai) and not live.row.ai
        available = await self.ai_available() if turning_ai_on else True
        async with live.lock:
            live = self._polls[evaluation_id]
            change = apply_switches(
                live.settings, body, ai_available=available, frozen=self._frozen_now(live)
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

            def switched(lp: LivePoll) -> None:
                lp.row = _replace_row(lp.row, votes=s.votes, moderation=s.moderation, ai=s.ai)
                lp.tally.apply_marks(written)
                lp.tally.set_moderation(s.moderation)

            live = self._apply(evaluation_id, version, switched)
            if change.ai_turned_on:  # a fresh run: no cool-down left from the last one
                self._cooling.pop(evaluation_id, None)
        return live.settings

    # --- live frames ---------------------------------------------------------------------------

    async def _flush(self, evaluation_id: str) -> None:
        """Build the poll's frames once, hand them to every subscriber, publish them on NATS."""
        live = self._polls.get(evaluation_id)
        if live is None:
            return
        wall, phone = self._frames(live)
        publish, live.publish_pending = live.publish_pending, False
        for frame in (wall, phone):
            data = frame.model_dump_json()
            chunk = sse_event("poll.tally", frame.seq, data)
            live.latest[frame.audience] = (frame.seq, chunk)
            self.metrics.frames.labels(frame.audience).inc()
            for sub in live.subscribers[frame.audience]:
                if sub.offer(chunk):
                    self.metrics.frames_dropped.inc()
            if publish:
                await self.nc.publish(subjects.poll_tally_subject(evaluation_id), data.encode())
        if live.subscribers["board"]:
            board = await self.board(evaluation_id)
            chunk = sse_event("poll.board", max(live.version, 1), board.model_dump_json())
            live.latest["board"] = (live.version, chunk)
            for sub in live.subscribers["board"]:
                if sub.offer(chunk):
                    self.metrics.frames_dropped.inc()

    async def stream(
        self, evaluation_id: str, audience: str, last_event_id: str | None
    ) -> tuple[LivePoll, Subscriber]:
        """Subscribe to a poll's frames; a (re)connecting client is sent the latest one at once."""
        live = await self.live(evaluation_id)
        sub = Subscriber()
        if audience == "board":
            board = await self.board(evaluation_id)
            sub.offer(sse_event("poll.board", max(live.version, 1), board.model_dump_json()))
        else:
            wall, phone = self._frames(live)
            frame = wall if audience == "wall" else phone
            if needs_frame(last_event_id, frame.seq):
                sub.offer(sse_event("poll.tally", frame.seq, frame.model_dump_json()))
        live.subscribers[audience].add(sub)
        self.metrics.sse_clients.labels(audience).inc()
        return live, sub

    def unsubscribe(self, live: LivePoll, audience: str, sub: Subscriber) -> None:
        """Stop sending to `sub`; a second call for the same subscriber does nothing."""
        # The live poll may have been replaced by a reload: its subscriber sets were kept.
        current = self._polls.get(live.row.evaluation_id, live)
        subscribers = current.subscribers[audience]
        if sub in subscribers:
            subscribers.discard(sub)
            self.metrics.sse_clients.labels(audience).dec()

    # --- AI ------------------------------------------------------------------------------------

    def _people(self, live: LivePoll) -> list[MaskedPerson]:
        return people_to_mask(live.row.roster, live.joined.values())

    async def request_ai_pass(self, evaluation_id: str, *, look: bool = True) -> bool:
        """Claim the lease when free and send the pass job, due `ai_job_delay_s` (3 s) later;
        True if claimed.

        `look`: first check this replica's tally holds an idea with no mark (False when the
        caller read the database and found one). Skipped without a write: a pass running here
        (it reads this idea too), a job claimed here and not started yet (it will), a failure
        of ours less than 30 s old (the row would refuse)."""
        live = await self.live(evaluation_id)
        if not live.row.ai or self._frozen_now(live):
            return False
        now = self.clock()
        if (
            evaluation_id in self._passes
            or now < self._claimed.get(evaluation_id, 0.0)
            or now < self._cooling.get(evaluation_id, 0.0)
        ):
            return False
        if look and not any(key not in live.tally.marks for key in live.tally.keys()):
            return False
        if not await self.repo.claim(evaluation_id, now):
            return False
        due = now + self.ai_job_delay_s
        self._claimed[evaluation_id] = due
        job = PollAiJob(evaluation_id=evaluation_id, lease=now, due_at=_dt(due))
        if self.js is None:
            self._spawn(self.run_ai_job(job))
            return True
        msg_id = f"{evaluation_id}:{now!r}"
        loop = asyncio.get_running_loop()
        give_up = loop.time() + AI_JOB_QUEUE_S
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
                if loop.time() + pause > give_up:
                    log.warning(
                        "poll %s: AI job not queued (%s); running it here", evaluation_id, e
                    )
                    self._spawn(self.run_ai_job(job))
                    return True
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)

    async def run_ai_job(self, job: PollAiJob, *, retry: bool = False) -> None:
        """The `poll.v1.ai.jobs` job: at its due time, the pass under the job's lease.

        `retry` (a later delivery of the job will come): a batch the gateway did not answer
        (`LlmNotAnswered`) raises, for the job to be redelivered; otherwise it is the board's
        `llm_failed`, like any failed call. A job whose pass is running already — here, or on a
        replica whose heartbeat is fresh (`pass_running`: a redelivery, or a job stored twice
        when its publish was retried across a stream's leader change) — raises
        `unavailable` with retry_after_s to come back later (on its last delivery it is dropped:
        the running pass does the work), never a second pass beside it."""
        wait = job.due_at.timestamp() - self.clock()
        if wait > 0:
            await asyncio.sleep(wait)
        evaluation_id = job.evaluation_id
        try:
            await self.live(evaluation_id)
        except ContractError as e:
            if e.code is not ErrorCode.not_found:
                raise
            log.warning("poll %s: AI job for a poll this database does not hold", evaluation_id)
            return
        running = self._passes.get(evaluation_id) == job.lease
        if not running and not await self.repo.start_pass(evaluation_id, job.lease, self.clock()):
            row = await self.repo.ai_run(evaluation_id)
            running = row is not None and pass_running(
                row.lease_at, row.heartbeat_at, job.lease, self.clock()
            )
            if not running:
                return  # the lease is gone (released, failed, taken over): nothing to run
        if running:
            if not retry:
                log.info("poll %s: its pass runs elsewhere; this last delivery ends", evaluation_id)
                return
            raise ContractError(
                ErrorCode.unavailable,
                f"poll {evaluation_id}: a pass of this lease is running",
                retry_after_s=PASS_ALIVE.total_seconds(),
            )
        self._passes[evaluation_id] = job.lease
        try:
            await self._ai_pass(evaluation_id, job.lease, retry=retry)
        except Exception:
            # Stopped for a redelivery (or failed): no pass runs now, whatever the heartbeat.
            with contextlib.suppress(Exception):
                await self.repo.pause(evaluation_id, job.lease)
            raise
        finally:
            self._end_pass(evaluation_id, job.lease)

    @contextlib.asynccontextmanager
    async def _beating(self, evaluation_id: str, lease: float) -> AsyncIterator[None]:
        """Beat the pass's heartbeat every PASS_BEAT while it waits for the model: a job
        delivered again meanwhile tells this live pass from a dead one (`pass_running`)."""

        async def beat() -> None:
            while True:
                await asyncio.sleep(PASS_BEAT.total_seconds())
                try:
                    await self.repo.beat(evaluation_id, lease, self.clock())
                except Exception as e:  # the database away a moment: the next beat
                    log.debug("poll %s: heartbeat not written (%s)", evaluation_id, e)

        task = asyncio.create_task(beat(), name=f"poll-beat:{evaluation_id}")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _pending_batch(
        self, evaluation_id: str, lease: float, live: LivePoll
    ) -> tuple[Batch, CompleteRequest] | None:
        """The batch a pass of `lease` sent and never saw answered, unless every one of its
        ideas has been decided since (by the teacher): then a fresh batch is chosen."""
        kept = read_pending(await self.repo.pending(evaluation_id, lease))
        if kept is None or all(idea.key in live.tally.marks for idea in kept[0].fresh):
            return None
        return kept

    def _end_pass(self, evaluation_id: str, lease: float) -> None:
        if self._passes.get(evaluation_id) == lease:
            del self._passes[evaluation_id]

    async def _ai_pass(self, evaluation_id: str, lease: float, *, retry: bool = False) -> None:
        """One pass: batches of up to 50 new ideas until none is left (FACTS D "Batches")."""
        sent: set[str] = set()
        while True:
            live = await self.live(evaluation_id)
            if not live.row.ai:
                await self.repo.release(evaluation_id, lease, self.clock())
                return
            calls = await self.repo.beat(evaluation_id, lease, self.clock())
            if calls is None:  # switched off, or taken over after going silent
                return
            if calls >= RUN_CAP:
                await self._ai_failed(live, lease, PollAiError.run_cap)
                return
            # Run again under this lease: the batch still out goes first, as it was sent.
            resend = None if sent else await self._pending_batch(evaluation_id, lease, live)
            if resend is not None:
                batch, request = resend
                sent |= batch.keys
                call = build_call(live.row.prompt, batch, name_mask(self._people(live)))
            else:
                answers = list(live.answers.items())
                marks = dict(live.tally.marks)
                batch = await asyncio.to_thread(select_batch, answers, marks, sent)
            if resend is None and not batch.fresh:
                await self.repo.release(evaluation_id, lease, self.clock())
                # Look once more, in the database: ideas typed between the last read and the
                # release, on any replica (whose claim failed while this pass held the lease).
                # An idea the model left out in this pass waits for the next one (`sent`).
                self._end_pass(evaluation_id, lease)
                state = await self.repo.state(evaluation_id)
                if state is not None:
                    stored = {m.key: m for m in state.marks}
                    again = await asyncio.to_thread(select_batch, state.answers, stored, sent)
                    if again.fresh:
                        if again.keys - set(live.tally.keys()):
                            # Ideas this replica never heard of: another replica committed them
                            # and died before its frame went out. Read the poll again, or every
                            # pass here would choose from the same stale tally and leave them
                            # unjudged (issue 20: ideas unjudged 75 s after a replica's kill).
                            await self._reload(evaluation_id)
                        await self.request_ai_pass(evaluation_id, look=False)
                return
            if resend is None:
                sent |= batch.keys
                call = build_call(live.row.prompt, batch, name_mask(self._people(live)))
                request = complete_request(call, live.row.teacher_id, "")
                request = request.model_copy(
                    update={
                        "request_id": batch_request_id(evaluation_id, lease, request),
                        "deadline_s": self.ai_deadline_s,
                    }
                )
                # Kept until its verdicts are written: a pass run again sends it again.
                await self.repo.keep_pending(evaluation_id, lease, pending_record(batch, request))
            try:
                async with self._beating(evaluation_id, lease):
                    reply = await self.llm.complete(request)
            except LlmNotAnswered:
                if retry:
                    # Not the model's answer: the job is redelivered under the same lease, and
                    # the same batch's id is answered from the call the gateway made, if any.
                    raise
                await self._ai_failed(live, lease, board_error(ErrorCode.llm_failed))
                return
            except ContractError as e:
                await self._ai_failed(live, lease, board_error(e.code))
                return
            if not await self.repo.after_success(evaluation_id, lease, self.clock()):
                return
            self.metrics.ai_batches.labels("ok").inc()
            verdicts = read_verdicts(reply.output, call)
            async with live.lock:
                # Read again (the poll held now): what the teacher did meanwhile counts.
                current = self._polls[evaluation_id].tally.marks
                proposed = apply_ai_verdicts(current, verdicts, call.judged, call.known, call.texts)
                written, version = await self.repo.write_ai_marks(
                    evaluation_id, marks_to_write(proposed, current), self.clock()
                )
                for mark in written:
                    self.metrics.ai_marks.labels(mark.status or "none").inc()
                if version is not None:
                    self._apply(evaluation_id, version, _marks_applier(written))

    async def _ai_failed(self, live: LivePoll, lease: float, error: PollAiError) -> None:
        """Fail closed: nothing written, the code on the board, the lease freed (retry ≥ 30 s)."""
        now = self.clock()
        await self.repo.after_failure(live.row.evaluation_id, lease, error, now)
        self._cooling[live.row.evaluation_id] = now + ERROR_COOLDOWN.total_seconds()
        self.metrics.ai_batches.labels(error.value).inc()
        log.warning("poll %s: AI batch failed: %s", live.row.evaluation_id, error.value)
        if live.subscribers["board"]:
            self._coalescer.touch(live.row.evaluation_id)

    async def ai_run(self, evaluation_id: str) -> AiRunRow | None:
        return await self.repo.ai_run(evaluation_id)

    # --- the freeze ----------------------------------------------------------------------------

    async def freeze_due(self) -> int:
        """Freeze every poll closed 30 days ago: keep its board and tally, purge its guests."""
        now = self.clock()
        done = 0
        for evaluation_id in await self.repo.due_freeze(now - FREEZE_AFTER.total_seconds()):
            live = await self.live(evaluation_id)
            async with live.lock:
                live = self._polls[evaluation_id]
                snap = live.snapshot()
                board = board_view(
                    live.tally.board(),
                    live.row.moderation,
                    PollAiState(available=False, on=live.row.ai, error=None),
                )
                view = {
                    "tally": {
                        "joined": snap.joined,
                        "answered": snap.answered,
                        "pending": snap.pending,
                        "cloud": [
                            {"key": b.key, "label": b.label, "count": b.count} for b in snap.cloud
                        ],
                    },
                    "board": board.model_dump(mode="json"),
                }
                version = await self.repo.freeze(evaluation_id, view, now)
                if not version:
                    continue

                def frozen(lp: LivePoll, snap: TallySnapshot = snap, board: Any = board) -> None:
                    lp.frozen, lp.frozen_board = snap, board
                    lp.row = _replace_row(lp.row, frozen_at=now)
                    for attempt, join in list(lp.joined.items()):
                        if join.participant.kind == "guest":
                            lp.joined.pop(attempt)
                            lp.answers.pop(attempt, None)
                            lp.tally.remove_participant(attempt)

                self._apply(evaluation_id, version, frozen)
                done += 1
        return done


def _replace_row(row: PollRow, **changes: Any) -> PollRow:
    return replace(row, **changes)


def _marks_applier(marks: list[IdeaMark]) -> Callable[[LivePoll], None]:
    def apply(live: LivePoll) -> None:
        live.tally.apply_marks(marks)

    return apply
