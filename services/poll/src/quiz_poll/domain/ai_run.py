"""The AI run of one poll (`poll_ai_runs`): its lease, call count and last failure, as pure rules.

ADR-072 §12–§13 and heig-quiz `apps/api/src/modules/poll/ai.ts` (FACTS D, "Batches"):
- An answer (or the teacher's "on") CLAIMS the lease when it is free, and sends one `poll.ai` job
  3 s later, so the ideas typed meanwhile share a call. A lease already held means a pass is
  coming, and that pass reads the newer ideas too.
- The lease is free when it is null or its heartbeat is more than 60 s old (the pass that held it
  died), AND there is no failure or the failure is more than 30 s old (a missing key is not asked
  for at every answer). A run past its cap (200 calls) is not claimed either.
- The pass beats the heartbeat at every batch and holds the lease by its value: a pass whose
  lease is no longer the row's (switched off, or replaced after going silent) stops.
- A call is refused past 200 calls (`run_cap`, recorded as the run's error). A success counts the
  call and clears the error; a failure records its code (as the board shows it), dates it, writes
  nothing else, and releases the lease (fail closed).
- Switching on starts a fresh run (calls and error reset); switching off drops the lease.

Each function returns the row as it must be after the step; the repository reads the row
(locked), asks the function, and writes the row it returns by a conditional UPDATE whose WHERE
is the same rule again (the lease across replicas is the database row's). `pass_running`
decides `start_pass`, `before_call` the run's cap at each batch of a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from quiz_contracts.errors import ErrorCode
from quiz_contracts.poll import PollAiError, PollAiRun
from quiz_servicekit.lease_time import beat_fresh

LEASE_STALE = timedelta(seconds=60)
ERROR_COOLDOWN = timedelta(seconds=30)
JOB_DELAY = timedelta(seconds=3)
RUN_CAP = 200
# A pass beats every PASS_BEAT while it works (waiting for the model too); a heartbeat younger
# than PASS_ALIVE means its pass is running now, somewhere.
PASS_BEAT = timedelta(seconds=4)
PASS_ALIVE = timedelta(seconds=12)


def new_run(evaluation_id: str) -> PollAiRun:
    """A poll's row before any pass: no lease, no call, no failure."""
    return PollAiRun(evaluation_id=evaluation_id)


def lease_held(run: PollAiRun, now: datetime) -> bool:
    """A live pass holds the lease: set, and its heartbeat no more than 60 s old."""
    if run.lease_at is None:
        return False
    beat = run.heartbeat_at or run.lease_at
    return beat >= now - LEASE_STALE


def cooling_down(run: PollAiRun, now: datetime) -> bool:
    """A failure less than 30 s old: no new pass yet."""
    if run.error is None or run.error_at is None:
        return False
    return run.error_at >= now - ERROR_COOLDOWN


def lease_free(run: PollAiRun | None, now: datetime) -> bool:
    """Whether a request may claim the lease now (null or stale, and not cooling down)."""
    if run is None:
        return True
    return not lease_held(run, now) and not cooling_down(run, now) and run.calls < RUN_CAP


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed lease: the row to write, and when the `poll.ai` job is due (3 s later)."""

    run: PollAiRun
    lease: datetime
    job_at: datetime


def claim(run: PollAiRun | None, evaluation_id: str, now: datetime) -> Claim | None:
    """Claim the lease for a pass, or None (held by a live pass, cooling down, or capped)."""
    if not lease_free(run, now):
        return None
    base = run if run is not None else new_run(evaluation_id)
    claimed = base.model_copy(update={"lease_at": now, "heartbeat_at": now})
    return Claim(run=claimed, lease=now, job_at=now + JOB_DELAY)


def holds(run: PollAiRun | None, lease: datetime) -> bool:
    """The pass that claimed `lease` still owns the run."""
    return run is not None and run.lease_at == lease


def heartbeat(run: PollAiRun, now: datetime) -> PollAiRun:
    """The pass is alive (written only while it holds the lease)."""
    return run.model_copy(update={"heartbeat_at": now})


def before_call(run: PollAiRun, now: datetime) -> PollAiRun | None:
    """None when a call may be made; else the released row recording `run_cap`."""
    if run.calls < RUN_CAP:
        return None
    capped = {"error": PollAiError.run_cap, "error_at": now}
    return run.model_copy(update={"lease_at": None, "heartbeat_at": now, **capped})


def after_success(run: PollAiRun, now: datetime) -> PollAiRun:
    """One more call, the failure cleared, the heartbeat moved."""
    return run.model_copy(
        update={"calls": run.calls + 1, "error": None, "error_at": None, "heartbeat_at": now}
    )


def after_failure(run: PollAiRun, code: ErrorCode | str, now: datetime) -> PollAiRun:
    """Fail closed: the failure's code for the board, dated for the cool-down, the lease freed."""
    return run.model_copy(
        update={"error": board_error(code), "error_at": now, "lease_at": None, "heartbeat_at": now}
    )


def pause(run: PollAiRun) -> PollAiRun:
    """The pass stopped for its job to be delivered again: the lease kept, no heartbeat, so the
    redelivery (on any replica) sees no pass running (`pass_running`) and starts at once."""
    return run.model_copy(update={"heartbeat_at": None})


def release(run: PollAiRun, now: datetime) -> PollAiRun:
    """Nothing left to judge: the lease is free for the next answer."""
    return run.model_copy(update={"lease_at": None, "heartbeat_at": now})


def switch_on(run: PollAiRun | None, evaluation_id: str, now: datetime) -> PollAiRun:
    """A fresh run: calls and failure reset, no lease (the caller also writes retroactive marks)."""
    base = run if run is not None else new_run(evaluation_id)
    return base.model_copy(
        update={"lease_at": None, "heartbeat_at": now, "calls": 0, "error": None, "error_at": None}
    )


def switch_off(run: PollAiRun, now: datetime) -> PollAiRun:
    """The lease dropped: a pass under way stops at its next batch."""
    return run.model_copy(update={"lease_at": None, "heartbeat_at": now})


_BOARD_ERRORS: dict[str, PollAiError] = {
    ErrorCode.llm_not_configured: PollAiError.not_configured,
    ErrorCode.llm_budget_exhausted: PollAiError.budget_exhausted,
    ErrorCode.rate_limited: PollAiError.rate_limited,
    ErrorCode.timeout: PollAiError.timeout,
    ErrorCode.invalid_request: PollAiError.refused,
}


def board_error(code: ErrorCode | str) -> PollAiError:
    """The board's name of a failure: the gateway's code mapped, else `provider_error`."""
    if isinstance(code, PollAiError):
        return code
    try:
        return PollAiError(code)
    except ValueError:
        return _BOARD_ERRORS.get(str(code), PollAiError.provider_error)


def pass_running(
    lease_at: float | None, heartbeat_at: float | None, lease: float, now: float
) -> bool:
    """Whether a pass of `lease` is running now (on any replica): the row still holds that lease
    and its heartbeat is under PASS_ALIVE old. Times in epoch seconds, as the row stores them.

    A job delivered again while its first delivery still runs elsewhere (a consumer leader
    changed, an in-progress ack lost), or a job stored twice (its publish retried across a
    stream's leader change), must not run a second pass beside it: two passes under
    one lease pick two different batches, and the ideas in both are paid twice (the chaos
    suite saw it). A pass that stopped for a redelivery clears its heartbeat (None), and one
    whose replica died stops beating, so neither holds the job back for long.
    """
    if lease_at != lease or heartbeat_at is None:
        return False
    # The claim writes heartbeat_at == lease_at: only a pass's own beat is later than that,
    # so the job the claim sent is never held back by the claim itself.
    return lease_at < heartbeat_at and beat_fresh(heartbeat_at, now, PASS_ALIVE.total_seconds())
