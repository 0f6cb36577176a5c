"""The AI pass of a poll: claimed by an answer, queued as a job, run under its lease (FACTS D).

One job: the scheduler and its lease bookkeeping (ADR-072 §12–§14; docs/poll.md "The AI pass").
- `request()`: an answer (AI on, an unmarked idea held) claims the lease of `poll_ai_runs` (one
  conditional UPDATE: one pass per poll across replicas) and queues one `poll.v1.ai.jobs` job
  due `job_delay_s` (3 s) later, so the ideas typed meanwhile share a call. Skipped without a
  write while a pass runs here, a job claimed here is not due yet, or a failure of ours is
  under 30 s old (the row would refuse).
- `run_job()`: at the job's due time, `start_pass` (one conditional UPDATE) refuses while another
  pass of the same lease beats (`pass_running`: a job delivered again, or stored twice); the
  refused job comes back PASS_ALIVE (12 s) later. A pass that stops for a redelivery clears its
  heartbeat (`pause`), so the next delivery starts at once.
- A pass: per batch the heartbeat (the pass stops if it lost the lease), the run's cap
  (`before_call`), the batch kept in `poll_ai_runs.pending` sent again verbatim when the pass
  runs again under its lease (same request id: answered from the paid call), else up to 50
  unmarked ideas not sent in this pass (`select_batch`, listed in key order), the call through
  the gateway with a heartbeat every PASS_BEAT (4 s) while the model answers, the verdicts
  written only where no mark exists. A failed call writes nothing, records its code and frees
  the lease (fail closed). When no idea is left the lease is released and the database looked
  at once more (ideas another replica took while the lease was held).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.llm import CompleteReply, CompleteRequest, Purpose
from quiz_contracts.poll import PollAiError, PollAiJob, PollAiState
from quiz_poll.cache import LivePoll, PollCache, marks_applier
from quiz_poll.domain.ai import (
    AiCall,
    Batch,
    apply_ai_verdicts,
    build_call,
    complete_request,
    marks_to_write,
    read_verdicts,
    select_batch,
)
from quiz_poll.domain.ai_ids import batch_request_id, pending_record, read_pending
from quiz_poll.domain.ai_run import (
    ERROR_COOLDOWN,
    PASS_ALIVE,
    PASS_BEAT,
    RUN_CAP,
    before_call,
    board_error,
    pass_running,
)
from quiz_poll.domain.masking import NameMask, name_mask, people_to_mask
from quiz_poll.domain.provider import NO_MODEL, RESIDENCY_LOCAL, ModelSight
from quiz_poll.metrics import PollMetrics
from quiz_poll.repository import PollRepository
from quiz_servicekit.llm import LlmClient, LlmNotAnswered
from quiz_servicekit.singleflight import SingleFlight

log = logging.getLogger(__name__)


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class AiPasses:
    """The AI passes of the polls held here (see the module docstring).

    `queue_job(job, msg_id)` is the edge's publish (False: run the pass here); `touch` makes the
    board's frames due (a failure shows on it); `clock` (epoch s) and `sleep` are the time.
    """

    def __init__(
        self,
        *,
        polls: PollCache,
        repo: PollRepository,
        llm: LlmClient,
        metrics: PollMetrics,
        queue_job: Callable[[PollAiJob, str], Awaitable[bool]],
        touch: Callable[[str], None],
        spawn: Callable[[Coroutine[Any, Any, Any]], object],
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        monotonic: Callable[[], float],
        job_delay_s: float,
        deadline_s: float,
        availability_ttl_s: float,
    ) -> None:
        self.polls = polls
        self.repo = repo
        self.llm = llm
        self.metrics = metrics
        self.queue_job = queue_job
        self.touch = touch
        self.spawn = spawn
        self.clock = clock
        self.sleep = sleep
        self.job_delay_s = job_delay_s
        self.deadline_s = deadline_s
        self._availability: SingleFlight[ModelSight] = SingleFlight(availability_ttl_s, monotonic)
        # Passes this replica runs, and its failures' cool-downs: an answer then skips the
        # claim (a write) that could not succeed. Other replicas' passes are the row's to tell.
        self._passes: dict[str, float] = {}  # evaluation -> the lease of our pass
        self._claimed: dict[str, float] = {}  # evaluation -> when the job claimed here starts
        self._cooling: dict[str, float] = {}

    # --- this replica's bookkeeping --------------------------------------------------------

    def busy(self, evaluation_id: str) -> bool:
        """A pass runs here, or a job claimed here has not started: keep the poll in memory."""
        return evaluation_id in self._passes or self.clock() < self._claimed.get(evaluation_id, 0.0)

    def forget(self, evaluation_id: str) -> None:
        """The poll left this replica's memory."""
        self._claimed.pop(evaluation_id, None)
        self._cooling.pop(evaluation_id, None)

    def switched_on(self, evaluation_id: str) -> None:
        """A fresh run: no cool-down left from the last one."""
        self._cooling.pop(evaluation_id, None)

    def _end_pass(self, evaluation_id: str, lease: float) -> None:
        if self._passes.get(evaluation_id) == lease:
            del self._passes[evaluation_id]

    # --- what the board shows -------------------------------------------------------------

    async def available(self) -> bool:
        """Whether the gateway can call a model for purpose poll (asked once per
        `availability_ttl_s`, its callers meanwhile sharing the answer)."""
        return (await self.sight()).available

    async def sight(self) -> ModelSight:
        """What the gateway says of purpose poll: available, and the model it calls (the
        notices name its provider, or say "demo"; issue 34). Asked as `available`."""
        return await self._availability.run(Purpose.poll, self._ask_available)

    async def _ask_available(self) -> ModelSight:
        try:
            reply = await self.llm.availability(Purpose.poll)
        except ContractError:
            return NO_MODEL
        # The client answers for a gateway that did not (fail closed): llm_failed with no model.
        # That is "the gateway does not answer", not a provider failing.
        answered = bool(reply.models)
        reason = reply.reason.value if reply.reason is not None and answered else None
        if reason == ErrorCode.llm_not_configured.value and reply.residency == "local":
            # Not a missing key: the gateway may call only self-hosted models (issue 31).
            reason = RESIDENCY_LOCAL
        return ModelSight(
            reply.available,
            reply.models.get(Purpose.poll),
            reason,
            named=reply.providers.get(Purpose.poll),
        )

    async def state(self, live: LivePoll) -> PollAiState:
        """The board's AI part: a model callable, the switch, the run's calls and last error."""
        run = await self.repo.ai_run(live.row.evaluation_id)
        sight = await self.sight()
        return PollAiState(
            available=sight.available,
            model=sight.model,
            provider=sight.provider,
            demo=sight.demo,
            on=live.row.ai,
            error=run.error if run is not None else None,
            calls=run.calls if run is not None else 0,
            run_cap=RUN_CAP,
        )

    # --- claim and queue -------------------------------------------------------------------

    async def request(self, evaluation_id: str, *, look: bool = True) -> bool:
        """Claim the lease when free and send the pass job, due `job_delay_s` (3 s) later;
        True if claimed.

        `look`: first check this replica's tally holds an idea with no mark (False when the
        caller read the database and found one)."""
        live = await self.polls.live(evaluation_id)
        now = self.clock()
        if not live.row.ai or live.frozen_now(now):
            return False
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
        due = now + self.job_delay_s
        self._claimed[evaluation_id] = due
        job = PollAiJob(evaluation_id=evaluation_id, lease=now, due_at=_dt(due))
        if not await self.queue_job(job, f"{evaluation_id}:{now!r}"):
            self.spawn(self.run_job(job))
        return True

    # --- the job ---------------------------------------------------------------------------

    async def run_job(self, job: PollAiJob, *, retry: bool = False) -> None:
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
            await self.sleep(wait)
        evaluation_id = job.evaluation_id
        try:
            await self.polls.live(evaluation_id)
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
            await self._pass(evaluation_id, job.lease, retry=retry)
        except Exception:
            # Stopped for a redelivery (or failed): no pass runs now, whatever the heartbeat.
            with contextlib.suppress(Exception):
                await self.repo.pause(evaluation_id, job.lease)
            raise
        finally:
            self._end_pass(evaluation_id, job.lease)

    # --- the pass --------------------------------------------------------------------------

    async def _pass(self, evaluation_id: str, lease: float, *, retry: bool) -> None:
        """One pass: batches of up to 50 new ideas until none is left (FACTS D "Batches")."""
        sent: set[str] = set()
        while True:
            live = await self.polls.live(evaluation_id)
            if not await self._may_call(live, lease):
                return
            chosen = await self._next_call(live, lease, sent)
            if chosen is None:
                await self._finish(live, lease, sent)
                return
            call, request = chosen
            reply = await self._call(live, lease, request, retry=retry)
            if reply is None or not await self.repo.after_success(
                evaluation_id, lease, self.clock()
            ):
                return
            self.metrics.ai_batches.labels("ok").inc()
            await self._write_verdicts(live, reply, call)

    async def _may_call(self, live: LivePoll, lease: float) -> bool:
        """The AI still on, the lease still ours (beaten), the run under its cap."""
        evaluation_id = live.row.evaluation_id
        if not live.row.ai:
            await self.repo.release(evaluation_id, lease, self.clock())
            return False
        now = self.clock()
        run = await self.repo.beat_pass(evaluation_id, lease, now)
        if run is None:  # switched off, or taken over after going silent
            return False
        if before_call(run, _dt(now)) is not None:  # the run's cap: `run_cap` on the board
            await self._failed(live, lease, PollAiError.run_cap)
            return False
        return True

    async def _next_call(
        self, live: LivePoll, lease: float, sent: set[str]
    ) -> tuple[AiCall, CompleteRequest] | None:
        """The next call of the pass, or None when no idea is left to send.

        Run again under this lease, the batch still out goes first, as it was sent; else a
        fresh batch, kept (`keep_pending`) until its verdicts are written."""
        evaluation_id = live.row.evaluation_id
        kept = None if sent else await self._pending_batch(evaluation_id, lease, live)
        if kept is not None:
            batch, request = kept
            sent |= batch.keys
            return build_call(live.row.prompt, batch, self._mask(live)), request
        answers = list(live.answers.items())
        marks = dict(live.tally.marks)
        batch = await asyncio.to_thread(select_batch, answers, marks, sent)
        if not batch.fresh:
            return None
        sent |= batch.keys
        call = build_call(live.row.prompt, batch, self._mask(live))
        request = complete_request(call, live.row.teacher_id, "")
        request = request.model_copy(
            update={
                "request_id": batch_request_id(evaluation_id, lease, request),
                "deadline_s": self.deadline_s,
            }
        )
        # Kept until its verdicts are written: a pass run again sends it again.
        await self.repo.keep_pending(evaluation_id, lease, pending_record(batch, request))
        return call, request

    @staticmethod
    def _mask(live: LivePoll) -> NameMask:
        return name_mask(people_to_mask(live.row.roster, live.joined.values()))

    async def _pending_batch(
        self, evaluation_id: str, lease: float, live: LivePoll
    ) -> tuple[Batch, CompleteRequest] | None:
        """The batch a pass of `lease` sent and never saw answered, unless every one of its
        ideas has been decided since (by the teacher): then a fresh batch is chosen."""
        kept = read_pending(await self.repo.pending(evaluation_id, lease))
        if kept is None or all(idea.key in live.tally.marks for idea in kept[0].fresh):
            return None
        return kept

    async def _finish(self, live: LivePoll, lease: float, sent: set[str]) -> None:
        """No idea left: release the lease, then look once more in the database — ideas typed
        between the last read and the release, on any replica (whose claim failed while this
        pass held the lease). An idea the model left out in this pass waits for the next one."""
        evaluation_id = live.row.evaluation_id
        await self.repo.release(evaluation_id, lease, self.clock())
        self._end_pass(evaluation_id, lease)
        state = await self.repo.state(evaluation_id)
        if state is None:
            return
        stored = {m.key: m for m in state.marks}
        again = await asyncio.to_thread(select_batch, state.answers, stored, sent)
        if not again.fresh:
            return
        if again.keys - set(live.tally.keys()):
            # Ideas this replica never heard of: another replica committed them and died
            # before its frame went out. Read the poll again, or every pass here would choose
            # from the same stale tally and leave them unjudged (issue 20: ideas unjudged 75 s
            # after a replica's kill).
            await self.polls.reload(evaluation_id)
        await self.request(evaluation_id, look=False)

    async def _call(
        self, live: LivePoll, lease: float, request: CompleteRequest, *, retry: bool
    ) -> CompleteReply | None:
        """The model's reply, beating the heartbeat while it comes; None when the call failed
        (recorded: `_failed`). A call not answered raises while the job will come again."""
        try:
            async with self._beating(live.row.evaluation_id, lease):
                return await self.llm.complete(request)
        except LlmNotAnswered:
            if retry:
                # Not the model's answer: the job is redelivered under the same lease, and
                # the same batch's id is answered from the call the gateway made, if any.
                raise
            await self._failed(live, lease, board_error(ErrorCode.llm_failed))
        except ContractError as e:
            await self._failed(live, lease, board_error(e.code))
        return None

    @contextlib.asynccontextmanager
    async def _beating(self, evaluation_id: str, lease: float) -> AsyncIterator[None]:
        """Beat the pass's heartbeat every PASS_BEAT while it waits for the model: a job
        delivered again meanwhile tells this live pass from a dead one (`pass_running`)."""

        async def beat() -> None:
            while True:
                await self.sleep(PASS_BEAT.total_seconds())
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

    async def _write_verdicts(self, live: LivePoll, reply: CompleteReply, call: AiCall) -> None:
        """The verdicts of the new ids sent, written where no mark exists yet."""
        evaluation_id = live.row.evaluation_id
        verdicts = read_verdicts(reply.output, call)
        async with live.lock:
            # Read again (the poll held now): what the teacher did meanwhile counts.
            current = self.polls[evaluation_id].tally.marks
            proposed = apply_ai_verdicts(current, verdicts, call.judged, call.known, call.texts)
            written, version = await self.repo.write_ai_marks(
                evaluation_id, marks_to_write(proposed, current), self.clock()
            )
            for mark in written:
                self.metrics.ai_marks.labels(mark.status or "none").inc()
            if version is not None:
                self.polls.apply(evaluation_id, version, marks_applier(written))

    async def _failed(self, live: LivePoll, lease: float, error: PollAiError) -> None:
        """Fail closed: nothing written, the code on the board, the lease freed (retry ≥ 30 s)."""
        now = self.clock()
        evaluation_id = live.row.evaluation_id
        await self.repo.after_failure(evaluation_id, lease, error, now)
        self._cooling[evaluation_id] = now + ERROR_COOLDOWN.total_seconds()
        self.metrics.ai_batches.labels(error.value).inc()
        log.warning("poll %s: AI batch failed: %s", evaluation_id, error.value)
        if live.subscribers["board"]:
            self.touch(evaluation_id)
