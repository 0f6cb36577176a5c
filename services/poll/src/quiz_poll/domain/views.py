"""What leaves the service: the staff board, the wall's and the phones' tallies, the live frames.

ADR-071 §5: the room reads the cloud, never the board. The cloud (`Bubble`s) holds nothing of a
hidden or unmoderated idea, so everything public is built from it alone:

- the WALL (the teacher's projection): the cloud while "show votes" is on; with it off the wall
  keeps the question alone (no idea at all, §7). `pending` is the real count (a teacher's exit).
- the PHONES: `pending` is 0 (the public view); the tally with its counts only while "show votes"
  is on (the platform's `PollPublicView.tally` is null otherwise); and always the visible ideas
  as a list without counts (§7, §11: the phones' shared list reads a visible idea's correction).
- the BOARD: every idea, raw text and correction, staff only.

Every frame is whole (no delta), numbered per poll (`seq`, the SSE id): a client that reconnects
with an older Last-Event-ID is simply sent the latest frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import (
    PollAiState,
    PollBubble,
    PollIdeaBoard,
    PollIdeaCluster,
    PollIdeaVariant,
    PollRevealBody,
    PollSettings,
    PollSharedIdea,
    PollTally,
    PollTallyFrame,
)
from quiz_poll.domain.board import Board, Bubble


@dataclass(frozen=True, slots=True)
class TallySnapshot:
    """The counts and the cloud at one moment: all a frame is built from."""

    joined: int
    answered: int
    pending: int
    cloud: tuple[Bubble, ...]


def snapshot(joined: int, answered: int, pending: int, cloud: Sequence[Bubble]) -> TallySnapshot:
    """A snapshot from a tally's numbers and cloud (incremental or recomputed alike)."""
    return TallySnapshot(joined, answered, pending, tuple(cloud))


def _bubbles(cloud: Sequence[Bubble]) -> list[PollBubble]:
    return [PollBubble(key=b.key, label=b.label, count=b.count) for b in cloud]


def wall_tally(
    snap: TallySnapshot, settings: PollSettings, bubbles: list[PollBubble] | None = None
) -> PollTally:
    """The projection's tally: the cloud only while votes are shown; `pending` for the teacher."""
    ideas = (_bubbles(snap.cloud) if bubbles is None else bubbles) if settings.votes else []
    return PollTally(joined=snap.joined, answered=snap.answered, ideas=ideas, pending=snap.pending)


def phone_tally(
    snap: TallySnapshot, settings: PollSettings, bubbles: list[PollBubble] | None = None
) -> PollTally | None:
    """The public tally: null while votes are hidden; never any pending count."""
    if not settings.votes:
        return None
    ideas = _bubbles(snap.cloud) if bubbles is None else bubbles
    return PollTally(joined=snap.joined, answered=snap.answered, ideas=ideas, pending=0)


def shared_list(snap: TallySnapshot) -> list[PollSharedIdea]:
    """The visible ideas as the phones list them: by label, then key; no count, no ranking."""
    ordered = sorted(snap.cloud, key=lambda b: (b.label.casefold(), b.label, b.key))
    return [PollSharedIdea(key=b.key, label=b.label) for b in ordered]


def frames(
    evaluation_id: str, seq: int, snap: TallySnapshot, settings: PollSettings, now: datetime
) -> tuple[PollTallyFrame, PollTallyFrame]:
    """The wall's and the phones' frames of one change (the same `seq`)."""
    bubbles = _bubbles(snap.cloud) if settings.votes else []  # frozen models: shared by both
    wall = PollTallyFrame(
        evaluation_id=evaluation_id,
        seq=seq,
        audience="wall",
        tally=wall_tally(snap, settings, bubbles),
        server_now=now,
    )
    phone = PollTallyFrame(
        evaluation_id=evaluation_id,
        seq=seq,
        audience="phone",
        tally=phone_tally(snap, settings, bubbles),
        shared_list=shared_list(snap),
        server_now=now,
    )
    return wall, phone


def needs_frame(last_event_id: str | None, seq: int) -> bool:
    """Whether a (re)connecting client must be sent the latest frame `seq` at once.

    A missing, unreadable or older Last-Event-ID gets it; a client that has `seq` already does
    not. A frame is whole, so the latest one IS the snapshot.
    """
    if last_event_id is None:
        return True
    try:
        seen = int(last_event_id)
    except ValueError:
        return True
    return seen != seq


def board_view(board: Board, moderation: bool, ai: PollAiState) -> PollIdeaBoard:
    """The staff board in the platform's `PollIdeaBoard` shape."""
    return PollIdeaBoard(
        moderation=moderation,
        ai=ai,
        answered=board.answered,
        pending=board.pending,
        clusters=[
            PollIdeaCluster(
                key=c.key,
                label=c.label,
                renamed=c.renamed,
                count=c.count,
                total=c.total,
                variants=[
                    PollIdeaVariant(
                        key=v.key,
                        text=v.text,
                        correction=v.correction,
                        ai=v.ai,
                        count=v.count,
                        status=v.status,
                        new_spellings=list(v.new_spellings),
                    )
                    for v in c.variants
                ],
            )
            for c in board.clusters
        ],
    )


@dataclass(frozen=True, slots=True)
class SwitchChange:
    """The settings after a `PollRevealBody`, and what the caller must do about it."""

    settings: PollSettings
    moderation_changed: bool
    ai_turned_on: bool
    ai_turned_off: bool


def apply_switches(
    settings: PollSettings, body: PollRevealBody, *, ai_available: bool, frozen: bool
) -> SwitchChange:
    """The display switches of a brainstorm (ADR-071 §4, §7; ADR-072 §2–§3).

    - `revealed: true` → 422 `poll_keyless`: a brainstorm has no key to reveal.
    - `ai: true` while the gateway cannot call a model → 422 `llm_unavailable`.
    - moderation or AI moved on a frozen poll (30 days after close) → 409 `poll_frozen`.
    Turning AI on is never retroactive: the caller writes an empty teacher mark on every idea
    already there (`ai.retroactive_marks`) and resets the run; turning it off drops the lease.
    """
    if body.revealed:
        raise ContractError(ErrorCode.poll_keyless, "A brainstorm has no answer to reveal.")
    moving_moderation = body.moderation is not None and body.moderation != settings.moderation
    moving_ai = body.ai is not None and body.ai != settings.ai
    if frozen and (moving_moderation or moving_ai):
        raise ContractError(
            ErrorCode.poll_frozen, "This poll closed over 30 days ago: its moderation is read-only."
        )
    if body.ai and not settings.ai and not ai_available:
        raise ContractError(ErrorCode.llm_unavailable, "No model can be called right now.")
    updated = settings.model_copy(
        update={
            "votes": settings.votes if body.votes is None else body.votes,
            "moderation": settings.moderation if body.moderation is None else body.moderation,
            "ai": settings.ai if body.ai is None else body.ai,
        }
    )
    return SwitchChange(
        settings=updated,
        moderation_changed=moving_moderation,
        ai_turned_on=moving_ai and bool(body.ai),
        ai_turned_off=moving_ai and not body.ai,
    )
