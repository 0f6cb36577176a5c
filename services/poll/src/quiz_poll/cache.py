"""The per-replica cache of live polls: each loaded once, kept current, reloaded, forgotten.

One job: hold the `LivePoll` of every evaluation this replica serves — the stored row, the
incremental tally (`domain.tally`), the answers (participants' order), the marks, who joined, and
the SSE subscribers — and keep it equal to the database:
- `live()` reads a poll once (one read in flight per poll; its callers share it); 404 when the
  database holds no brainstorm for the evaluation;
- `apply()` applies a change this replica committed (one transaction that bumped the poll's
  `version`) unless the object was read at that version already, and tells `changed` (the frames);
  the changes are the `…_applier` functions below, one per kind of write;
- `remote_frame()`: a frame of a poll held here whose `seq` this replica neither made nor read
  means another replica changed it: `reload()` reads it again. Local changes committed while the
  read runs are journaled (version, change) and replayed on the new object when the read did not
  see them; a remote change noticed meanwhile reads again;
- `evict_idle()` forgets the polls nobody used for a while (no stream, no write, no pass).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark, PollIdeaBoard, PollJoin, PollParticipant, PollSettings
from quiz_poll.domain.freeze import (
    FrozenPoll,
    ensure_moderation_open,
    guests_to_purge,
    is_frozen,
    read_frozen,
)
from quiz_poll.domain.tally import BrainstormTally, tally_from_answers
from quiz_poll.domain.views import TallySnapshot, snapshot
from quiz_poll.live import Subscriber
from quiz_poll.metrics import PollMetrics
from quiz_poll.repository import PollRepository, PollRow, PollState
from quiz_servicekit.singleflight import SingleFlight

AUDIENCES = ("wall", "phone", "board")
Change = Callable[["LivePoll"], None]


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
    journal: list[tuple[int, Change]] = field(default_factory=list)
    answer_versions: dict[str, int] = field(default_factory=dict)
    frozen: TallySnapshot | None = None
    frozen_board: PollIdeaBoard | None = None
    subscribers: dict[str, set[Subscriber]] = field(
        default_factory=lambda: {a: set() for a in AUDIENCES}
    )
    latest: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    publish_pending: bool = False
    used_at: float = 0.0  # monotonic s: last read by a request or a job

    @property
    def settings(self) -> PollSettings:
        return PollSettings(
            anonymous=self.row.anonymous,
            votes=self.row.votes,
            moderation=self.row.moderation,
            ai=self.row.ai,
        )

    def frozen_now(self, now: float) -> bool:
        """Whether its moderation is read-only at `now` (epoch s): `freeze.is_frozen`."""
        closed, at, frozen = self._freeze_times(now)
        return is_frozen(closed, at, frozen_at=frozen)

    def ensure_moderation_open(self, now: float) -> None:
        """409 `poll_frozen` once frozen: `freeze.ensure_moderation_open`."""
        closed, at, frozen = self._freeze_times(now)
        ensure_moderation_open(closed, at, frozen_at=frozen)

    def _freeze_times(self, now: float) -> tuple[datetime | None, datetime, datetime | None]:
        return _at(self.row.closed_at), datetime.fromtimestamp(now, UTC), _at(self.row.frozen_at)

    def snapshot(self) -> TallySnapshot:
        if self.frozen is not None:
            return self.frozen
        t = self.tally
        return snapshot(t.joined, t.answered, t.pending, t.cloud())


def _at(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def live_from_state(state: PollState, used_at: float) -> LivePoll:
    """The `LivePoll` of a poll as the database holds it (`PollRepository.state`)."""
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
        used_at=used_at,
    )
    if row.frozen_view is not None:
        live.frozen, live.frozen_board = read_frozen(row.frozen_view)
    return live


def replace_row(row: PollRow, **changes: Any) -> PollRow:
    """The row with `changes` (a committed switch, close or freeze)."""
    return replace(row, **changes)


def marks_applier(marks: list[IdeaMark]) -> Change:
    """The change that puts committed `marks` in a poll's tally."""

    def apply(live: LivePoll) -> None:
        live.tally.apply_marks(marks)

    return apply


def closed_applier(closed_at: float | None) -> Change:
    """The change of a committed close (epoch s): no answer after it."""

    def apply(live: LivePoll) -> None:
        live.row = replace_row(live.row, closed_at=closed_at)

    return apply


def join_applier(join: PollJoin) -> Change:
    """The change of a committed join: the attempt counts in `joined` (and is masked)."""
    attempt = join.participant.attempt_id

    def apply(live: LivePoll) -> None:
        live.joined[attempt] = join
        live.tally.join(attempt)

    return apply


def answer_applier(
    evaluation_id: str, participant: PollParticipant, ideas: list[str], version: int
) -> Change:
    """The change of a participant's whole answer committed at `version`."""
    attempt = participant.attempt_id
    payload = {"ideas": ideas}

    def apply(live: LivePoll) -> None:
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

    return apply


def switches_applier(settings: PollSettings, written: list[IdeaMark]) -> Change:
    """The change of committed switches (and the marks of an AI switched on)."""

    def apply(live: LivePoll) -> None:
        live.row = replace_row(
            live.row, votes=settings.votes, moderation=settings.moderation, ai=settings.ai
        )
        live.tally.apply_marks(written)
        live.tally.set_moderation(settings.moderation)

    return apply


def freeze_applier(frozen: FrozenPoll, board: PollIdeaBoard, now: float) -> Change:
    """The change of a committed freeze: the kept view served, the guests gone."""

    def apply(live: LivePoll) -> None:
        live.frozen, live.frozen_board = frozen.tally, board
        live.row = replace_row(live.row, frozen_at=now)
        for attempt in guests_to_purge(j.participant for j in live.joined.values()):
            live.joined.pop(attempt)
            live.answers.pop(attempt, None)
            live.tally.remove_participant(attempt)

    return apply


class PollCache:
    """The live polls of this replica (see the module docstring).

    `changed(evaluation)` is told after every change (the frames become due); `spawn` runs a
    reload in the background; `monotonic` (s) dates each use, for `evict_idle`.
    """

    def __init__(
        self,
        repo: PollRepository,
        metrics: PollMetrics,
        *,
        changed: Callable[[str], None],
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        monotonic: Callable[[], float],
    ) -> None:
        self.repo = repo
        self.metrics = metrics
        self.changed = changed
        self.spawn = spawn
        self.monotonic = monotonic
        self._polls: dict[str, LivePoll] = {}
        # One read in flight per poll, its callers share it; nothing remembered (ttl 0): the
        # cache is `_polls`.
        self._loads: SingleFlight[LivePoll | None] = SingleFlight(0.0, monotonic)

    def get(self, evaluation_id: str) -> LivePoll | None:
        """The poll held now, if any (no read, no use recorded)."""
        return self._polls.get(evaluation_id)

    def __getitem__(self, evaluation_id: str) -> LivePoll:
        return self._polls[evaluation_id]

    def __iter__(self) -> Iterator[LivePoll]:
        return iter(list(self._polls.values()))

    async def live(self, evaluation_id: str) -> LivePoll:
        """The poll held in memory (read once from the database); 404 when there is none."""
        live = self._polls.get(evaluation_id)
        if live is not None:
            live.used_at = self.monotonic()
            return live
        loaded = await self._loads.run(evaluation_id, lambda: self._load(evaluation_id))
        if loaded is None:
            raise ContractError(ErrorCode.not_found, "poll not found")
        return loaded

    async def _load(self, evaluation_id: str) -> LivePoll | None:
        state = await self.repo.state(evaluation_id)
        if state is None:
            return None
        loaded = live_from_state(state, self.monotonic())
        self._polls[evaluation_id] = loaded
        return loaded

    async def reload(self, evaluation_id: str) -> None:
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
        new = live_from_state(state, self.monotonic())
        for version, change in old.journal:
            if version > new.loaded_version:
                change(new)
                new.local.add(version)
        old.journal = []
        new.version = max(new.version, old.version)
        new.subscribers, new.latest, new.lock = old.subscribers, old.latest, old.lock
        self._polls[evaluation_id] = new
        self.metrics.reloads.inc()
        self.changed(evaluation_id)
        if old.reload_again:
            self.spawn(self.reload(evaluation_id))

    def remote_frame(self, evaluation_id: str, seq: int) -> None:
        """A frame published by some replica: read the poll again if another one changed it."""
        live = self._polls.get(evaluation_id)
        if live is not None and seq > live.loaded_version and seq not in live.local:
            self.spawn(self.reload(evaluation_id))

    def apply(self, evaluation_id: str, version: int | None, change: Change) -> LivePoll:
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
        self.changed(evaluation_id)
        return live

    def evict_idle(self, idle_s: float, busy: Callable[[str], bool]) -> list[str]:
        """Forget the polls nobody used for `idle_s` seconds (no stream open, no write in
        progress, not `busy`: an AI pass); the next request reads them again. Those forgotten."""
        now = self.monotonic()
        idle = [
            evaluation_id
            for evaluation_id, live in self._polls.items()
            if now - live.used_at > idle_s
            and not any(live.subscribers.values())
            and not live.lock.locked()
            and not live.reloading
            and not busy(evaluation_id)
        ]
        for evaluation_id in idle:
            del self._polls[evaluation_id]
        return idle
