"""Thirty days after close (ADR-071, amended 2026-10-15 by ADR-014 #873).

Once a poll's guests are purged, 30 days after it closed, its ideas are frozen and its moderation
is read-only. Read here as:
- the board and the tally are taken once, just before the guests' answers go (`freeze`), and
  are what the poll shows from then on — a purge does not empty a cloud the class saw;
- moderation is read-only: no action on the board, no moderation or AI switch (409
  `poll_frozen`); the AI has nothing to judge (a closed poll takes no answer);
- the guests' attempts are the ones purged; accounts' answers stay the platform's to keep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import PollIdeaBoard, PollParticipant
from quiz_poll.domain.board import Board, Bubble
from quiz_poll.domain.tally import BrainstormTally
from quiz_poll.domain.views import TallySnapshot, snapshot

FREEZE_AFTER = timedelta(days=30)


def freezes_at(closed_at: datetime) -> datetime:
    """When a poll closed at `closed_at` freezes."""
    return closed_at + FREEZE_AFTER


def is_frozen(
    closed_at: datetime | None, now: datetime, *, frozen_at: datetime | None = None
) -> bool:
    """A poll freezes 30 days after it closed (from then on, even before the sweep stored its
    view); one the sweep froze (`frozen_at`) stays frozen; a running poll never is."""
    return frozen_at is not None or (closed_at is not None and now >= freezes_at(closed_at))


def ensure_moderation_open(
    closed_at: datetime | None, now: datetime, *, frozen_at: datetime | None = None
) -> None:
    """409 `poll_frozen` for a board action on a frozen poll (`is_frozen`)."""
    if is_frozen(closed_at, now, frozen_at=frozen_at):
        raise ContractError(
            ErrorCode.poll_frozen,
            "This poll closed over 30 days ago: its moderation is read-only.",
        )


@dataclass(frozen=True, slots=True)
class FrozenPoll:
    """What a frozen poll shows from then on: its last board (staff) and tally numbers/cloud."""

    frozen_at: datetime
    moderation: bool
    board: Board
    tally: TallySnapshot


def freeze(tally: BrainstormTally, now: datetime) -> FrozenPoll:
    """The poll as it stands, kept before its guests are purged."""
    return FrozenPoll(
        frozen_at=now,
        moderation=tally.moderation,
        board=tally.board(),
        tally=snapshot(tally.joined, tally.answered, tally.pending, tally.cloud()),
    )


def guests_to_purge(participants: Iterable[PollParticipant]) -> list[str]:
    """The attempts whose answers go at the freeze: the guests' (nobody the platform knows)."""
    return [p.attempt_id for p in participants if p.kind == "guest"]


def frozen_view(frozen: FrozenPoll, board: PollIdeaBoard) -> dict[str, Any]:
    """What `polls.frozen_view` stores (JSON): the tally's numbers and cloud, the staff board."""
    snap = frozen.tally
    return {
        "tally": {
            "joined": snap.joined,
            "answered": snap.answered,
            "pending": snap.pending,
            "cloud": [{"key": b.key, "label": b.label, "count": b.count} for b in snap.cloud],
        },
        "board": board.model_dump(mode="json"),
    }


def read_frozen(view: dict[str, Any]) -> tuple[TallySnapshot, PollIdeaBoard]:
    """The tally and the board a `frozen_view` stored, as the frozen poll serves them."""
    tv = view["tally"]
    tally = snapshot(
        tv["joined"],
        tv["answered"],
        tv["pending"],
        [Bubble(b["key"], b["label"], b["count"]) for b in tv["cloud"]],
    )
    return tally, PollIdeaBoard.model_validate(view["board"])
